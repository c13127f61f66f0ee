#!@BASH@
# forge-ci deployment hook, written by `forge-ci hooks install` from hooks/hook.bash: do not edit.
#
# One program, run by git as pre-receive or reference-transaction; it dispatches on the name it
# was started as. Every push waits for it three times per ref update, so it is bash (about 3 ms
# to start, against 15-20 ms for a Python interpreter) and holds no database connection: it hands
# what git told it to the SSH parent of this push over loopback TCP and obeys the answer. The
# conversation, and why TCP and two secrets, is described in forge_ci/hookwire.py.
#
# Without a push session (an operator's git gc, pack-refs or update-ref), reference-transaction
# records nothing and exits 0, while pre-receive refuses: every push must come through forge-ci.
set -u
export LC_ALL=C

refuse() {
    printf '%s\n' "$1" >&2
    exit 1
}

hook=${0##*/}
case $hook in
    pre-receive)
        phase=-
        ;;
    reference-transaction)
        phase=${1-}
        case $phase in
            prepared | committed | aborted) ;;
            *) exec cat >/dev/null ;; # "preparing" (git 2.46+) comes before any lock: nothing yet
        esac
        ;;
    *)
        refuse "forge-ci: '$hook' is not a forge-ci hook"
        ;;
esac

session=${@ENV_SESSION@-}
if [ -z "$session" ]; then
    cat >/dev/null
    [ "$hook" = pre-receive ] && refuse "forge-ci: pushes are accepted only through forge-ci's \
SSH server; this push has no forge-ci session and is refused"
    exit 0 # not a push: nothing to record
fi

request="@MAGIC@"$'\n'"$hook $phase $session"$'\n'
count=0
while IFS= read -r line || [ -n "$line" ]; do
    if [ "$hook" = reference-transaction ]; then
        # Entries that move nothing are not sent (forge_ci.refs.makes_event, the same rule):
        # HEAD's reflog-only mirror, 0000 -> 0000 from packed-refs, forge-ci's own pins.
        old=${line%% *}
        rest=${line#* }
        new=${rest%% *}
        ref=${rest#* }
        if [ "$old" = "$new" ] || [ "$ref" = HEAD ] || [[ $ref == "@INTERNAL_PREFIX@"* ]]; then
            continue
        fi
    fi
    request+=$line$'\n'
    count=$((count + 1))
done
if [ "$hook" = reference-transaction ] && [ "$count" -eq 0 ]; then
    exit 0
fi

port=${@ENV_PORT@-}
key=${@ENV_ANSWER_KEY@-}
if [ -z "$port" ] || [ -z "$key" ]; then
    refuse "forge-ci: this push has no channel to the forge-ci server; the update is refused"
fi
{ exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null ||
    refuse "forge-ci: cannot reach the forge-ci server for this push; the update is refused"
printf '%s.\n' "$request" >&3 2>/dev/null ||
    refuse "forge-ci: the forge-ci server ended this push without an answer"
# The server answers within its database's own timeouts; this only ends a hook whose server
# hangs, so that receive-pack (and the repository lock it holds) is freed.
IFS= read -r -t @ANSWER_TIMEOUT@ answer <&3 ||
    refuse "forge-ci: the forge-ci server ended this push without an answer"
if [ "$answer" = "ok $key" ]; then
    exit 0
fi
if [ "$answer" = refuse ]; then
    while IFS= read -r -t 10 line <&3 || [ -n "${line-}" ]; do
        printf '%s\n' "$line" >&2
        line=
    done
    exit 1
fi
refuse "forge-ci: the answer for this push did not come from its forge-ci server; refused"
