#!/bin/sh
# Two "hosts" on this machine, for running MPI ranks over TCP (docs/machine.md, "Running on
# a cluster"). Needs root (CAP_NET_ADMIN, CAP_SYS_ADMIN).
#
#   scripts/two_hosts.sh up NAME DIR     hosts NAME0 (10.77.0.1) and NAME1 (10.77.0.2)
#   scripts/two_hosts.sh down NAME DIR   remove them (also what a failed `up` left)
#
# Each host is a network namespace named like it, the two joined by a veth pair, with
# /etc/netns/HOST/hosts naming both (the real /etc/hosts is not touched). `up` writes to DIR:
#   DIR/host HOST COMMAND...   runs the shell command COMMAND on HOST: inside its namespace,
#                              with its own hostname (UTS namespace) and its own boot id, so
#                              that neither MPI (nor UCX) takes the two for one machine and
#                              talks over shared memory;
#   DIR/agent [-x] HOST COMMAND...  the same, called as `ssh` by the MPI launchers;
#   DIR/env                    the variables that make MPICH and OpenMPI use DIR/agent.
# NAME must be short (veth names have at most 15 characters: NAME plus 2).
set -eu

action=${1:-}
name=${2:-}
dir=${3:-}
if [ -z "$action" ] || [ -z "$name" ] || [ -z "$dir" ]; then
    echo "usage: $0 up|down NAME DIR" >&2
    exit 2
fi
if [ ${#name} -gt 13 ]; then
    echo "$0: NAME '$name' is longer than 13 characters" >&2
    exit 2
fi

down() {
    for i in 0 1; do
        ip netns delete "$name$i" 2>/dev/null || true
        ip link delete "${name}v$i" 2>/dev/null || true
        rm -rf "/etc/netns/$name$i"
    done
    rm -f "$dir/host" "$dir/agent" "$dir/env" "$dir/boot_id-${name}0" "$dir/boot_id-${name}1"
}

up() {
    mkdir -p "$dir"
    dir=$(cd "$dir" && pwd)
    trap 'down' EXIT
    ip link add "${name}v0" type veth peer name "${name}v1"
    for i in 0 1; do
        ip netns add "$name$i"
        ip link set "${name}v$i" netns "$name$i"
        ip -n "$name$i" addr add "10.77.0.$((i + 1))/24" dev "${name}v$i"
        ip -n "$name$i" link set lo up
        ip -n "$name$i" link set "${name}v$i" up
        mkdir -p "/etc/netns/$name$i"
        printf '127.0.0.1 localhost\n10.77.0.1 %s0\n10.77.0.2 %s1\n' "$name" "$name" \
            >"/etc/netns/$name$i/hosts"
        cat /proc/sys/kernel/random/uuid >"$dir/boot_id-$name$i"
    done
    cat >"$dir/host" <<EOF
#!/bin/sh
# host HOST COMMAND...: run the shell command COMMAND on HOST (${name}0 or ${name}1).
host=\$1
shift
case "\$host" in
    ${name}0 | ${name}1) ;;
    *) echo "$dir/host: unknown host '\$host'" >&2; exit 255 ;;
esac
exec ip netns exec "\$host" unshare --uts --mount sh -c \\
    'hostname "\$0" && mount --bind "$dir/boot_id-\$0" /proc/sys/kernel/random/boot_id && exec sh -c "\$1"' \\
    "\$host" "\$*"
EOF
    cat >"$dir/agent" <<EOF
#!/bin/sh
# What the MPI launchers call instead of ssh: agent [options] HOST COMMAND...
while [ \$# -gt 0 ]; do
    case "\$1" in
        -[opli]) shift 2 ;;
        -*) shift ;;
        *) break ;;
    esac
done
exec "$dir/host" "\$@"
EOF
    cat >"$dir/env" <<EOF
export HYDRA_LAUNCHER=ssh HYDRA_LAUNCHER_EXEC=$dir/agent
export PRTE_MCA_plm_ssh_agent=$dir/agent
EOF
    chmod +x "$dir/host" "$dir/agent"
    trap - EXIT
}

case "$action" in
    up) up ;;
    down) down ;;
    *) echo "usage: $0 up|down NAME DIR" >&2; exit 2 ;;
esac
