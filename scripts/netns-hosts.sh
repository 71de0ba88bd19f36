#!/bin/bash
# netns-hosts.sh — several hosts, for real, on one machine: network namespaces joined by
# veth links, so that a multi-rank gentrain job talks TCP between "hosts" instead of
# sharing one kernel's memory. Linux, root (or CAP_SYS_ADMIN + CAP_NET_ADMIN), iproute2.
#
# What it builds (every object inside namespaces it creates and deletes again; the
# machine's own network namespace gets no interface, address, route or qdisc):
#
#   <P>-node0  eth0 10.77.0.1/24 ─veth─ p0 ┐
#   <P>-node1  eth0 10.77.0.2/24 ─veth─ p1 ┤ <P>-switch: bridge br0 over p0..pN-1
#   ...                                    ┘   (or netwire, below, when a delay is set)
#
# 2 to 4 host namespaces (NH_HOSTS), each a host named like one (<P>-node<i>, P = gt
# and this shell's pid): a loopback, one eth0, and, for every process started in it
# through this script, its own hostname (a UTS namespace), so Open MPI sees separate
# nodes and gentrain ranks report separate hosts. The filesystem is shared (the run
# folder, the data and the binaries are the same files everywhere), as on a cluster
# with a shared home.
#
# Links (NH_RATE, NH_DELAY; both empty: as fast as veth goes):
#  - NH_RATE (tc units, e.g. 100mbit): a tbf qdisc on every host's eth0 caps what the
#    host sends, so each host-to-host path crosses one capped hop each way;
#  - NH_DELAY (e.g. 2ms, 500us): one-way latency added to every host-to-host path:
#    netem on each eth0 where the kernel has it (with the tbf as its child; not yet run:
#    the kernel this was written on has no netem), else the switch is scripts/netwire
#    (NETWIRE: its binary, `make scripts/netwire`), a learning switch in user space
#    whose ports delay every frame, started at real-time priority (chrt) when it can
#    be; NH_DELAY_WITH=netem|wire forces one.
#
# Launching: mpirun runs on node0, as after logging into the first host, with
#   --hostfile <dir>/hostfile           (the host names, NH_SLOTS slots each)
#   --mca plm_rsh_agent <dir>/agent     (like ssh: enters the host's namespace with
#                                        `ip netns exec`, sets its hostname, runs the
#                                        command through sh; refuses other hosts)
#   --mca pml ob1 --mca btl tcp,self    (no shared memory between ranks, no other
#   --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24
#                                        transport: TCP over the veths only)
#   --mca plm_rsh_no_tree_spawn 1
#
# As a command: the cluster is up while COMMAND runs on node0, then removed:
#   scripts/netns-hosts.sh [--hosts N] [--slots S] [--rate R] [--delay D] COMMAND [ARG]...
# A COMMAND named mpirun or mpiexec gets the options above inserted; any other gets
# NH_HOSTFILE and NH_MPI_OPTS_STR (the options as one string) in its environment. SIGUSR1
# and SIGTERM to the script are passed to COMMAND (to mpirun both as SIGUSR1: gentrain
# checkpoints and exits 75, and so does mpirun).
# Exit status: COMMAND's; 77 when namespaces cannot be made here (the reason on stderr).
#   scripts/netns-hosts.sh --hosts 2 --rate 1gbit --delay 1ms \
#       mpirun -np 2 --bind-to none build/gentrain train --config my.cfg
#
# As a library (tests/test_netns.sh, scripts/netns-plan.sh):
#   . scripts/netns-hosts.sh
#   nh_usable || skip "$NH_WHY"          # root, iproute2, namespaces, veth, tc, ...
#   trap nh_down EXIT                     # removes everything, whatever happened
#   NH_HOSTS=2 NH_RATE=100mbit NH_DELAY=2ms nh_up "$folder" || fail
#   nh_mpirun -np 2 --bind-to none "$GENTRAIN" train ...   # mpirun on node0
#   nh_exec "${NH_NAMES[1]}" COMMAND...   # any command on a host
#   nh_on "${NH_NAMES[0]}"; "${NH_ON[@]}" mpirun "${NH_MPI_OPTS[@]}" ... &   # its pid: $!
#   nh_bytes "${NH_NAMES[1]}"             # bytes through that host's eth0 (rx + tx)
#   nh_down
# Settings: NH_HOSTS (2), NH_SLOTS (1), NH_RATE, NH_DELAY, NH_DELAY_WITH, NH_SUBNET
# (first three octets, 10.77.0), NETWIRE, MPIEXEC (mpirun). A namespace left by a run
# killed with SIGKILL is listed by `ip netns list` (gt<pid>-...): `ip netns del` it.

NH_HOSTS=${NH_HOSTS:-2}
NH_SLOTS=${NH_SLOTS:-1}
NH_RATE=${NH_RATE:-}
NH_DELAY=${NH_DELAY:-}
NH_DELAY_WITH=${NH_DELAY_WITH:-}
NH_SUBNET=${NH_SUBNET:-10.77.0}
NH_NAMES=()
NH_CREATED=()
NH_WIRE_PID=
NH_WHY=
NH_DIR=

# nh_delay_us DELAY: microseconds of a delay written as tc does (2ms, 500us, 0.5ms, 1s).
nh_delay_us() {
    awk -v d="$1" 'BEGIN {
        if (match(d, /^[0-9]+(\.[0-9]+)?/) == 0) exit 1
        v = substr(d, 1, RLENGTH); u = substr(d, RLENGTH + 1)
        if (u == "us" || u == "usec") f = 1; else if (u == "ms" || u == "msec") f = 1e3
        else if (u == "s" || u == "sec") f = 1e6; else exit 1
        printf "%d\n", v * f + 0.5 }'
}

# nh_rate_bytes RATE: bytes per second of a tc rate written in bits (100mbit, 1gbit).
nh_rate_bytes() {
    awk -v r="$1" 'BEGIN {
        if (match(r, /^[0-9]+(\.[0-9]+)?/) == 0) exit 1
        v = substr(r, 1, RLENGTH); u = substr(r, RLENGTH + 1)
        if (u == "bit") f = 1; else if (u == "kbit") f = 1e3; else if (u == "mbit") f = 1e6
        else if (u == "gbit") f = 1e9; else exit 1
        if (v * f < 8000) exit 1
        printf "%d\n", v * f / 8 }'
}

# nh_usable: whether this machine can run the cluster asked for (NH_HOSTS, NH_RATE,
# NH_DELAY); when not, returns 1 with the reason in NH_WHY. Makes and deletes one probe
# namespace. Decides NH_DELAY_WITH when a delay is asked for and it is unset.
nh_usable() {
    local c probe ok
    if [ "$(id -u)" != 0 ]; then NH_WHY="not root (namespaces and veths need it)"; return 1; fi
    for c in ip tc unshare hostname; do
        command -v "$c" > /dev/null 2>&1 || PATH=$PATH:/usr/sbin:/sbin
        command -v "$c" > /dev/null 2>&1 || { NH_WHY="no $c (iproute2, util-linux)"; return 1; }
    done
    case $NH_HOSTS in 2 | 3 | 4) ;; *) NH_WHY="NH_HOSTS must be 2, 3 or 4"; return 1 ;; esac
    if [ -n "$NH_RATE" ] && ! nh_rate_bytes "$NH_RATE" > /dev/null; then
        NH_WHY="rate '$NH_RATE' is not tc bits per second (e.g. 100mbit)"; return 1
    fi
    if [ -n "$NH_DELAY" ] && ! nh_delay_us "$NH_DELAY" > /dev/null; then
        NH_WHY="delay '$NH_DELAY' is not a time (e.g. 2ms)"; return 1
    fi
    probe=gt$$-probe
    if ! ip netns add "$probe" 2> /dev/null; then
        NH_WHY="ip netns add fails here (no CAP_SYS_ADMIN, or no network namespaces)"
        return 1
    fi
    ok=1
    if ! ip -n "$probe" link add nhp0 type veth peer name nhp1 2> /dev/null ||
        ! ip -n "$probe" link set nhp0 up 2> /dev/null; then
        NH_WHY="cannot make a veth link in a namespace (no CAP_NET_ADMIN, or no veth)"
        ok=0
    elif ! ip -n "$probe" link add nhbr type bridge 2> /dev/null; then
        NH_WHY="cannot make a bridge in a namespace"
        ok=0
    elif ! ip netns exec "$probe" unshare --uts hostname gt-probe 2> /dev/null; then
        NH_WHY="cannot give a namespace its own hostname (unshare --uts)"
        ok=0
    elif [ -n "$NH_RATE" ] &&
        ! tc -n "$probe" qdisc add dev nhp0 root tbf rate 1mbit burst 16kb latency 20ms \
            2> /dev/null; then
        NH_WHY="no tbf qdisc in this kernel (a rate needs it)"
        ok=0
    elif [ -n "$NH_DELAY" ]; then
        tc -n "$probe" qdisc del dev nhp0 root 2> /dev/null
        if [ -z "$NH_DELAY_WITH" ]; then
            if tc -n "$probe" qdisc add dev nhp0 root netem delay 1ms 2> /dev/null; then
                NH_DELAY_WITH=netem
            else
                NH_DELAY_WITH=wire
            fi
        fi
        if [ "$NH_DELAY_WITH" = wire ] && ! [ -x "${NETWIRE:-}" ]; then
            NH_WHY="no netem qdisc in this kernel, and NETWIRE is not the netwire binary \
(make scripts/netwire) that adds the delay instead"
            ok=0
        fi
    fi
    ip netns del "$probe" 2> /dev/null
    [ $ok = 1 ]
}

# nh_ip ARGS...: ip ARGS, saying what failed.
nh_ip() { ip "$@" || { echo "netns-hosts: failed: ip $*" >&2; return 1; }; }

# nh_up FOLDER: makes the cluster (NH_HOSTS hosts, links as NH_RATE and NH_DELAY say);
# the hostfile, the agent and netwire's output go in FOLDER. Sets NH_NAMES (the hosts),
# NH_HOSTFILE, NH_AGENT, NH_MPI_OPTS (array). Returns 1 on a failure (what failed on
# stderr); call nh_down in any case (a trap on EXIT).
nh_up() {
    NH_DIR=$1
    case $NH_DIR in *[[:space:]:]*)
        echo "netns-hosts: the folder must not hold spaces or colons (Open MPI splits the agent's path there): $NH_DIR" >&2
        return 1 ;;
    esac
    mkdir -p "$NH_DIR" || return 1
    local p=gt$$ i ns sw burst rate_b delay_us
    while ip netns list | grep -q "^$p-"; do p=gt$$x$RANDOM; done
    sw=$p-switch
    NH_NAMES=()
    for ((i = 0; i < NH_HOSTS; i++)); do NH_NAMES+=("$p-node$i"); done
    if [ -n "$NH_DELAY" ]; then
        delay_us=$(nh_delay_us "$NH_DELAY") || { echo "netns-hosts: bad delay $NH_DELAY" >&2; return 1; }
        [ -n "$NH_DELAY_WITH" ] || NH_DELAY_WITH=wire
    fi
    if [ -n "$NH_RATE" ]; then
        rate_b=$(nh_rate_bytes "$NH_RATE") || { echo "netns-hosts: bad rate $NH_RATE" >&2; return 1; }
        # 2 ms of the rate, at least 16 kB: tbf's bucket (short bursts at line speed).
        burst=$((rate_b / 500 > 16384 ? rate_b / 500 : 16384))
    fi

    nh_ip netns add "$sw" || return 1
    NH_CREATED+=("$sw")
    nh_ip -n "$sw" link set lo up || return 1
    if [ "$NH_DELAY_WITH" != wire ] || [ -z "$NH_DELAY" ]; then
        nh_ip -n "$sw" link add br0 type bridge || return 1
        nh_ip -n "$sw" link set br0 up || return 1
    fi
    for ((i = 0; i < NH_HOSTS; i++)); do
        ns=${NH_NAMES[i]}
        nh_ip netns add "$ns" || return 1
        NH_CREATED+=("$ns")
        # No IPv6 chatter (router solicitations, DAD) on the links: MPI uses IPv4 here.
        ip netns exec "$ns" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6;
            echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6' 2> /dev/null
        nh_ip -n "$ns" link set lo up || return 1
        nh_ip -n "$sw" link add "p$i" type veth peer name eth0 netns "$ns" || return 1
        if [ "$NH_DELAY_WITH" != wire ] || [ -z "$NH_DELAY" ]; then
            nh_ip -n "$sw" link set "p$i" master br0 || return 1
        fi
        nh_ip -n "$sw" link set "p$i" up || return 1
        nh_ip -n "$ns" addr add "$NH_SUBNET.$((i + 1))/24" dev eth0 || return 1
        nh_ip -n "$ns" link set eth0 up || return 1
        if [ -n "$NH_DELAY" ] && [ "$NH_DELAY_WITH" = netem ]; then
            tc -n "$ns" qdisc add dev eth0 root handle 1: netem delay "${delay_us}us" || return 1
            if [ -n "$NH_RATE" ]; then
                tc -n "$ns" qdisc add dev eth0 parent 1:1 handle 10: tbf rate "$NH_RATE" \
                    burst "$burst" latency 20ms || return 1
            fi
        elif [ -n "$NH_RATE" ]; then
            tc -n "$ns" qdisc add dev eth0 root tbf rate "$NH_RATE" burst "$burst" \
                latency 20ms || return 1
        fi
    done
    ip netns exec "$sw" sh -c 'echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6' 2> /dev/null
    if [ -n "$NH_DELAY" ] && [ "$NH_DELAY_WITH" = wire ]; then
        local ports=() ready=$NH_DIR/netwire.ready
        for ((i = 0; i < NH_HOSTS; i++)); do ports+=("p$i"); done
        rm -f "$ready"
        # Real-time priority, as a switch is hardware of its own: ranks polling in MPI on
        # every core would otherwise hold frames up by time slices (a 1 kB MPI ping-pong
        # on 2 ms, 2 busy cores: 8-12 ms one way median, 3.8 fastest, against 3-4.4
        # median, 2.04 fastest, at real-time priority).
        local rt=()
        command -v chrt > /dev/null 2>&1 && chrt -f 10 true 2> /dev/null && rt=(chrt -f 10)
        ip netns exec "$sw" "${rt[@]}" "$NETWIRE" --delay-us "$delay_us" --ready "$ready" \
            "${ports[@]}" > "$NH_DIR/netwire.out" 2>&1 &
        NH_WIRE_PID=$!
        for ((i = 0; i < 100; i++)); do
            [ -e "$ready" ] && break
            kill -0 "$NH_WIRE_PID" 2> /dev/null || break
            sleep 0.05
        done
        if ! [ -e "$ready" ]; then
            echo "netns-hosts: netwire did not start:" >&2
            cat "$NH_DIR/netwire.out" >&2
            return 1
        fi
    fi

    NH_HOSTFILE=$NH_DIR/hostfile
    : > "$NH_HOSTFILE"
    for ns in "${NH_NAMES[@]}"; do echo "$ns slots=$NH_SLOTS" >> "$NH_HOSTFILE"; done
    # The agent: Open MPI calls it as `agent HOST COMMAND...`, the way it calls ssh (the
    # words of COMMAND joined by spaces and run by a shell on HOST).
    NH_AGENT=$NH_DIR/agent
    {
        echo '#!/bin/sh'
        echo "# Open MPI's plm_rsh_agent for these hosts (scripts/netns-hosts.sh)."
        echo "hosts='${NH_NAMES[*]}'"
        cat << 'EOF'
host=$1
shift
case " $hosts " in
*" $host "*) ;;
*) echo "netns agent: no host $host here" >&2; exit 255 ;;
esac
exec ip netns exec "$host" unshare --uts /bin/sh -c 'hostname "$0" && exec /bin/sh -c "$1"' \
    "$host" "$*"
EOF
    } > "$NH_AGENT" && chmod 755 "$NH_AGENT" || return 1
    NH_MPI_OPTS=(--hostfile "$NH_HOSTFILE" --mca plm_rsh_agent "$NH_AGENT"
                 --mca plm_rsh_no_tree_spawn 1 --mca pml ob1 --mca btl tcp,self
                 --mca btl_tcp_if_include "$NH_SUBNET.0/24"
                 --mca oob_tcp_if_include "$NH_SUBNET.0/24")
    return 0
}

# nh_describe: one line per host and one for the links.
nh_describe() {
    local i how=
    for ((i = 0; i < ${#NH_NAMES[@]}; i++)); do
        echo "host ${NH_NAMES[i]}: $NH_SUBNET.$((i + 1)), $NH_SLOTS slot(s)"
    done
    if [ -n "$NH_DELAY" ]; then
        how=" (netem)"
        [ "$NH_DELAY_WITH" = wire ] && how=" (netwire, the switch)"
    fi
    echo "links: rate ${NH_RATE:-uncapped} (tbf), one-way delay ${NH_DELAY:-none}$how"
}

# nh_on HOST: sets NH_ON to the words that run a command on HOST (its namespace and
# hostname), argument by argument, with no shell in between: "${NH_ON[@]}" CMD ARG...
# The process started is the command itself (each step execs the next), so its pid, as
# `$!` gives it, is the one to signal.
nh_on() {
    NH_ON=(ip netns exec "$1" unshare --uts /bin/sh -c 'hostname "$0" && exec "$@"' "$1")
}

# nh_exec HOST COMMAND...: COMMAND on HOST (see nh_on).
nh_exec() {
    nh_on "$1"
    shift
    "${NH_ON[@]}" "$@"
}

# nh_mpirun ARGS...: mpirun on the first host, over the hostfile and TCP only.
nh_mpirun() { nh_exec "${NH_NAMES[0]}" "${MPIEXEC:-mpirun}" "${NH_MPI_OPTS[@]}" "$@"; }

# nh_bytes HOST: bytes received plus sent by HOST's eth0 so far.
nh_bytes() {
    local rx tx
    rx=$(ip netns exec "$1" cat /sys/class/net/eth0/statistics/rx_bytes 2> /dev/null)
    tx=$(ip netns exec "$1" cat /sys/class/net/eth0/statistics/tx_bytes 2> /dev/null)
    echo $(( ${rx:-0} + ${tx:-0} ))
}

# nh_down: stops what runs in the cluster's namespaces (listed by `ip netns pids`, so
# only processes started in them) and deletes the namespaces, which takes their veths,
# bridge and qdiscs along. Safe to call twice, and after a failed nh_up.
nh_down() {
    local ns pids i
    if [ -n "$NH_WIRE_PID" ]; then
        kill -TERM "$NH_WIRE_PID" 2> /dev/null
        wait "$NH_WIRE_PID" 2> /dev/null
        NH_WIRE_PID=
    fi
    for ns in "${NH_CREATED[@]}"; do
        pids=$(ip netns pids "$ns" 2> /dev/null)
        [ -n "$pids" ] || continue
        # shellcheck disable=SC2086
        kill -TERM $pids 2> /dev/null
        for ((i = 0; i < 40; i++)); do
            [ -z "$(ip netns pids "$ns" 2> /dev/null)" ] && break
            sleep 0.05
        done
        pids=$(ip netns pids "$ns" 2> /dev/null)
        # shellcheck disable=SC2086
        [ -z "$pids" ] || kill -KILL $pids 2> /dev/null
    done
    for ((i = ${#NH_CREATED[@]} - 1; i >= 0; i--)); do
        ip netns del "${NH_CREATED[i]}" 2> /dev/null
    done
    NH_CREATED=()
}

# The command-line use (see the header).
nh_main() {
    local child rc
    while [ $# -gt 0 ]; do
        case $1 in
        --hosts) NH_HOSTS=$2; shift 2 ;;
        --slots) NH_SLOTS=$2; shift 2 ;;
        --rate) NH_RATE=$2; shift 2 ;;
        --delay) NH_DELAY=$2; shift 2 ;;
        -h | --help) sed -n '2,/^$/s/^# \{0,1\}//p' "$0"; return 0 ;;
        --) shift; break ;;
        -*) echo "netns-hosts: unknown option $1 (--help)" >&2; return 2 ;;
        *) break ;;
        esac
    done
    [ $# -gt 0 ] || { echo "netns-hosts: no command (--help)" >&2; return 2; }
    case $NH_HOSTS in 2 | 3 | 4) ;; *) echo "netns-hosts: --hosts takes 2, 3 or 4" >&2; return 2 ;; esac
    case $NH_SLOTS in [1-9] | [1-9][0-9]) ;; *) echo "netns-hosts: --slots takes 1 to 99" >&2; return 2 ;; esac
    if [ -z "${NETWIRE:-}" ] && [ -x "$(dirname "$0")/netwire" ]; then
        NETWIRE=$(dirname "$0")/netwire
    fi
    if ! nh_usable; then
        echo "netns-hosts: cannot run here: $NH_WHY" >&2
        return 77
    fi
    NH_TMP=$(mktemp -d "${TMPDIR:-/tmp}/netns-hosts.XXXXXX") || return 1
    trap 'nh_down; rm -rf "$NH_TMP"' EXIT
    trap 'exit 129' HUP
    trap 'exit 130' INT
    nh_up "$NH_TMP" || return 1
    nh_describe
    export NH_HOSTFILE
    NH_MPI_OPTS_STR="${NH_MPI_OPTS[*]}"
    export NH_MPI_OPTS_STR
    nh_on "${NH_NAMES[0]}"
    local term=TERM
    case ${1##*/} in
    mpirun | mpiexec | orterun)
        local launcher=$1
        shift
        "${NH_ON[@]}" "$launcher" "${NH_MPI_OPTS[@]}" "$@" &
        # mpirun passes SIGTERM on to the ranks too, but then ends with status 1 of its
        # own whatever they did; SIGUSR1 makes the ranks stop the same way (gentrain:
        # checkpoint, exit 75) and mpirun end with their status.
        term=USR1
        ;;
    *) "${NH_ON[@]}" "$@" & ;;
    esac
    child=$!
    # Signals for the command reach it (bash runs a trap between commands: hence the
    # background command and `wait`, which a trapped signal interrupts: then wait again).
    trap 'NH_SIG=1; kill -USR1 $child 2> /dev/null' USR1
    trap 'NH_SIG=1; kill -$term $child 2> /dev/null' TERM
    while :; do
        NH_SIG=0
        wait "$child"
        rc=$?
        [ "$NH_SIG" = 1 ] || break
    done
    return $rc
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    nh_main "$@"
    exit $?
fi
