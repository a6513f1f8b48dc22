#!/usr/bin/env bash
# A single-host Slurm (munged, slurmctld, slurmd) for TestSlurm in internal/boot/pmi,
# which runs the PMI-1 client under `srun --mpi=pmi2`. Needs root and Debian's apt.
#
#   bash .ci/slurm-up.sh        install slurm-wlm and munge if missing, start the daemons that
#                               are not running, wait until `sinfo` shows this host idle, and
#                               write the daemons' pids, one a line, to $WEFT_SLURM_PIDS
#   bash .ci/slurm-up.sh stop   kill the pids in that file (the same as kill $(cat FILE))
#
# Idempotent: a second run finds the daemons alive and only waits for the node. Exits non-zero
# with a message on stderr (and the end of the daemon's log) when any step fails.
set -euo pipefail

PIDS=${WEFT_SLURM_PIDS:-/run/weft-slurm/pids}
CONF=/etc/slurm/slurm.conf
LOGDIR=/var/log/slurm
CTLD_PID=/run/slurmctld.pid
SLURMD_PID=/run/slurmd.pid
MUNGE_PID=/run/munge/munged.pid
IDLE_WAIT=${WEFT_SLURM_IDLE_WAIT:-60} # seconds

die() {
	echo "slurm-up: $*" >&2
	exit 1
}
say() { echo "slurm-up: $*"; }

# pidof_file FILE NAME: the pid in FILE if that process is alive and is NAME, else nothing.
pidof_file() {
	local pid
	[ -s "$1" ] || return 0
	pid=$(tr -dc 0-9 <"$1")
	[ -n "$pid" ] && [ -d "/proc/$pid" ] && [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] && echo "$pid"
	return 0
}

stop_pid() { # stop_pid PID: TERM, then KILL after 10 s
	local pid=$1
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 100); do
		[ -d "/proc/$pid" ] || return 0
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
}

if [ "${1:-}" = stop ]; then
	[ -s "$PIDS" ] || {
		say "no pid file $PIDS: nothing to stop"
		exit 0
	}
	pids=$(cat "$PIDS")
	for pid in $pids; do stop_pid "$pid"; done
	rm -f "$PIDS"
	say "stopped pids $(echo "$pids" | tr '\n' ' ')"
	exit 0
fi
[ $# -eq 0 ] || die "usage: $0 [stop]"
[ "$(id -u)" = 0 ] || die "must run as root (installs packages, starts munged/slurmctld/slurmd as root)"

start=$(date +%s)

# 1. Packages.
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v srun >/dev/null ||
	! command -v sinfo >/dev/null || ! command -v munged >/dev/null; then
	command -v apt-get >/dev/null || die "slurm-wlm/munge are not installed and there is no apt-get"
	say "installing slurm-wlm munge"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y -qq slurm-wlm munge >/tmp/slurm-up.apt.log 2>&1; then
		apt-get update -qq >>/tmp/slurm-up.apt.log 2>&1 || true
		apt-get install -y -qq slurm-wlm munge >>/tmp/slurm-up.apt.log 2>&1 || {
			tail -n 20 /tmp/slurm-up.apt.log >&2
			die "apt-get install -y slurm-wlm munge failed (log: /tmp/slurm-up.apt.log)"
		}
	fi
	for b in slurmctld slurmd srun sinfo scontrol munged munge unmunge; do
		command -v "$b" >/dev/null || die "$b is still missing after installing slurm-wlm munge"
	done
fi

# 2. munge: key, run dir, daemon.
getent passwd munge >/dev/null || die "no user munge (the munge package creates it)"
install -d -o munge -g munge -m 700 /etc/munge
if [ ! -s /etc/munge/munge.key ]; then
	dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none || die "cannot write /etc/munge/munge.key"
fi
chown munge:munge /etc/munge/munge.key
chmod 400 /etc/munge/munge.key
install -d -o munge -g munge -m 755 /run/munge
install -d -o munge -g munge -m 700 /var/lib/munge /var/log/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
	say "starting munged"
	out=$(munged --force 2>&1) || die "munged --force failed: $out"
	for _ in $(seq 50); do
		munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break
		sleep 0.1
	done
	out=$(munge -n 2>&1 | unmunge 2>&1) || {
		tail -n 5 /var/log/munge/munged.log >&2 2>/dev/null || true
		die "munged started but munge -n | unmunge fails: $out"
	}
fi
munge_pid=$(pidof_file "$MUNGE_PID" munged)
[ -n "$munge_pid" ] || die "munge answers but $MUNGE_PID names no live munged"

# 3. slurm.conf for this host.
H=$(hostname -s)
[ -n "$H" ] || die "hostname -s is empty"
getent hosts "$H" >/dev/null || die "host name $H does not resolve (add it to /etc/hosts)"
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd "$LOGDIR" "$(dirname "$PIDS")"
want=$(
	cat <<EOF
# Written by weft's .ci/slurm-up.sh: a single-host Slurm for the PMI tests.
ClusterName=local
SlurmctldHost=$H
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=$CTLD_PID
SlurmdPidFile=$SLURMD_PID
SlurmctldLogFile=$LOGDIR/slurmctld.log
SlurmdLogFile=$LOGDIR/slurmd.log
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
NodeName=$H CPUs=$(nproc) State=UNKNOWN
PartitionName=debug Nodes=$H Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE
EOF
)
ctld_pid=$(pidof_file "$CTLD_PID" slurmctld)
slurmd_pid=$(pidof_file "$SLURMD_PID" slurmd)
if [ "$(cat "$CONF" 2>/dev/null)" != "$want" ]; then
	say "writing $CONF (NodeName=$H)"
	printf '%s\n' "$want" >"$CONF"
	# Daemons started with another configuration: restart them.
	for pid in $slurmd_pid $ctld_pid; do stop_pid "$pid"; done
	ctld_pid=''
	slurmd_pid=''
fi

# start_daemon NAME PIDFILE: start NAME (it forks into the background) and wait for its pid file.
start_daemon() {
	local name=$1 pidfile=$2 out pid=
	say "starting $name" >&2
	rm -f "$pidfile"
	out=$("$name" 2>&1) || {
		tail -n 15 "$LOGDIR/$name.log" >&2 2>/dev/null || true
		die "$name failed to start: $out"
	}
	for _ in $(seq 100); do
		pid=$(pidof_file "$pidfile" "$name")
		[ -n "$pid" ] && break
		sleep 0.1
	done
	if [ -z "$pid" ]; then
		tail -n 15 "$LOGDIR/$name.log" >&2 2>/dev/null || true
		die "$name did not stay up (no live pid in $pidfile after 10 s; log: $LOGDIR/$name.log)"
	fi
	echo "$pid"
}

# 4. Daemons. The pid file lists every daemon up so far, so that stop works after a failure too.
record_pids() {
	for p in "$munge_pid" "$ctld_pid" "$slurmd_pid"; do
		[ -z "$p" ] || echo "$p"
	done >"$PIDS"
}
record_pids
[ -n "$ctld_pid" ] || ctld_pid=$(start_daemon slurmctld "$CTLD_PID")
record_pids
deadline=$((SECONDS + 20))
until scontrol ping 2>/dev/null | grep -q UP; do
	if [ ! -d "/proc/$ctld_pid" ] || [ $SECONDS -ge $deadline ]; then
		tail -n 15 "$LOGDIR/slurmctld.log" >&2 2>/dev/null || true
		[ -d "/proc/$ctld_pid" ] || die "slurmctld (pid $ctld_pid) exited; see the log above ($LOGDIR/slurmctld.log)"
		die "slurmctld (pid $ctld_pid) does not answer scontrol ping after 20s: $(scontrol ping 2>&1 | head -n 1)"
	fi
	sleep 0.2
done
[ -n "$slurmd_pid" ] || slurmd_pid=$(start_daemon slurmd "$SLURMD_PID")
record_pids

# 5. Wait for the node to be idle (mixed/allocated also means it is up, with jobs on it).
state=
for _ in $(seq $((IDLE_WAIT * 2))); do
	[ -d "/proc/$slurmd_pid" ] || {
		tail -n 15 "$LOGDIR/slurmd.log" >&2 2>/dev/null || true
		die "slurmd (pid $slurmd_pid) exited; see the log above ($LOGDIR/slurmd.log)"
	}
	state=$(sinfo -h -n "$H" -o %T 2>&1 | head -n 1) || true
	case $state in
	idle | mixed | allocated) break ;;
	down | drained | draining | drain) scontrol update NodeName="$H" State=RESUME >/dev/null 2>&1 || true ;;
	esac
	sleep 0.5
done
case $state in
idle | mixed | allocated) ;;
*)
	tail -n 15 "$LOGDIR/slurmd.log" >&2 2>/dev/null || true
	die "node $H is not idle after ${IDLE_WAIT}s: sinfo says '$state'; $(scontrol show node "$H" 2>&1 | grep -E 'State=|Reason=' | tr -s ' ')"
	;;
esac
say "node $H $state after $(($(date +%s) - start))s; pids munged=$munge_pid slurmctld=$ctld_pid slurmd=$slurmd_pid in $PIDS"
