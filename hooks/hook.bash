#!@BASH@
# forge-ci deployment hook, written by `forge-ci hooks install` from hooks/hook.bash: do not edit.
#
# git runs it as pre-receive, once per push, with every proposed update on stdin, before any ref
# moves. It holds no database connection: it hands the updates to the SSH parent of this push
# over loopback TCP and obeys the answer. The parent checks the ref policy and records each update
# as an intent (committed before it answers); after receive-pack has ended, the parent settles the
# intents against the refs, under the repository lock it holds for the whole push. The
# conversation, and why TCP and two secrets, is described in forge_ci/hookwire.py; why there is no
# reference-transaction hook, in docs/ssh.md ("The hooks").
#
# Without a push session (git run by hand on the server) it refuses: every push must come through
# forge-ci.
set -u
export LC_ALL=C

refuse() {
    printf '%s\n' "$1" >&2
    exit 1
}

hook=${0##*/}
[ "$hook" = pre-receive ] || refuse "forge-ci: '$hook' is not a forge-ci hook"

session=${@ENV_SESSION@-}
if [ -z "$session" ]; then
    cat >/dev/null
    refuse "forge-ci: pushes are accepted only through forge-ci's SSH server; this push has no \
forge-ci session and is refused"
fi

# All of git's lines at once: `read` takes a pipe one byte at a time, $(cat) in blocks.
updates=$(cat)
[ -n "$updates" ] || exit 0 # nothing proposed (git does not run the hook then, but be exact)

port=${@ENV_PORT@-}
key=${@ENV_ANSWER_KEY@-}
if [ -z "$port" ] || [ -z "$key" ]; then
    refuse "forge-ci: this push has no channel to the forge-ci server; the update is refused"
fi
{ exec 3<>"/dev/tcp/127.0.0.1/$port"; } 2>/dev/null ||
    refuse "forge-ci: cannot reach the forge-ci server for this push; the update is refused"
printf '%s\n%s %s %s\n%s\n.\n' "@MAGIC@" "$hook" - "$session" "$updates" >&3 2>/dev/null ||
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
