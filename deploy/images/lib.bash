# Shared by deploy/build-deploy-images: local debootstrap bases and builds cached by content hash.
# (The same recipe as deploy/build-runner-image: debootstrap, trim, `docker import`; a built
# image's ID is recorded under its source hash and reused while it exists.)
#
# Callers set: ROOT, STATE (record directory), MIRROR, work (a private scratch directory), and
# define say/die.

image_id() { docker image inspect --format '{{.Id}}' "$1" 2>/dev/null; }

# debootstrap_base TAG PACKAGES MESSAGE: make TAG (minbase bookworm + PACKAGES) unless it exists.
debootstrap_base() {
    local tag=$1 packages=$2 message=$3 root started=$SECONDS
    [[ -n $(image_id "$tag") ]] && return 0
    [[ $(id -u) -eq 0 ]] || die "making $tag with debootstrap needs root (or pass a base)"
    command -v debootstrap >/dev/null ||
        die "debootstrap missing: apt-get install debootstrap (deploy/setup-host does)"
    root=$work/rootfs-${tag//[:\/]/-}
    say "making $tag with debootstrap from $MIRROR (a few minutes, once)"
    debootstrap --variant=minbase --include="$packages" \
        bookworm "$root" "$MIRROR" >"$work/debootstrap.log" 2>&1 ||
        { tail -n 20 "$work/debootstrap.log" >&2; die "debootstrap of $tag failed"; }
    rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/var/log/* \
        "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/* \
        "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old
    find "$root/usr/share/doc" -mindepth 1 -type f ! -name copyright -delete
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
    : >"$root/etc/resolv.conf"
    echo localhost >"$root/etc/hostname"
    tar --numeric-owner -C "$root" --exclude='./dev/*' --exclude='./proc/*' --exclude='./sys/*' \
        -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' \
        --message "forge-ci: $message" - "$tag" >/dev/null
    rm -rf "$root"
    say "made $tag in $((SECONDS - started))s"
}

# context_hash DIR BASE_ID: the hash of every file in DIR and the base image's ID.
context_hash() {
    (
        cd "$1"
        {
            find . -type f -print0 | sort -z | xargs -0 sha256sum
            printf 'base %s\n' "$2"
        } | sha256sum | cut -d' ' -f1
    )
}

# cached_build KIND TAG CONTEXT BASE [docker build options...]: build CONTEXT/Dockerfile as TAG,
# unless the image recorded for the same source hash still exists (then only re-tag it).
cached_build() {
    local kind=$1 tag=$2 context=$3 base=$4 hash record existing started=$SECONDS
    shift 4
    hash=$(context_hash "$context" "$(image_id "$base")")
    mkdir -p "$STATE"
    record=$STATE/$kind-$hash
    if [[ -s $record ]]; then
        existing=$(<"$record")
        if [[ $(docker image inspect --format "{{index .Config.Labels \"forge-ci.$kind.source-hash\"}}" \
            "$existing" 2>/dev/null) == "$hash" ]]; then
            [[ $(image_id "$tag") == "$existing" ]] || docker tag "$existing" "$tag"
            say "$tag is up to date (source hash ${hash:0:12})"
            return 0
        fi
    fi
    say "building $tag from $base (source hash ${hash:0:12})"
    docker build --network=none --file "$context/Dockerfile" \
        --build-arg "BASE_IMAGE=$base" \
        --label "forge-ci.$kind.source-hash=$hash" \
        "$@" --iidfile "$work/iid-$kind" --tag "$tag" "$context" >"$work/build-$kind.log" 2>&1 ||
        { tail -n 30 "$work/build-$kind.log" >&2; die "docker build of $tag failed"; }
    cp "$work/iid-$kind" "$record.new" && mv "$record.new" "$record"
    say "built $tag in $((SECONDS - started))s"
}
