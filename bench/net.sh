#!/usr/bin/env bash
# bench/net.sh: Weft's network (TCP) path between procs beside the TCP paths of
# MPICH and Open MPI, and the sweep that picks Weft's network eager limit.
#
# Every run is 2 procs on this machine talking over loopback TCP:
#   weft:    weft run -n 2 p2p ...            (weft run -n 8 --per-proc 4 for msgrate)
#   mpich:   MPIR_CVAR_NOLOCAL=1 UCX_TLS=tcp,self mpiexec.mpich -n 2 p2p.mpich ...
#            (ch4:ucx; NOLOCAL sends local ranks through the netmod, UCX over TCP)
#   openmpi: mpirun.openmpi ... --mca pml ob1 --mca btl tcp,self -n 2 p2p.openmpi ...
# Weft's driver is ./bench/p2p, the peers' its C twin bench/peers/p2p.c. Tests
# run interleaved (weft, mpich, openmpi, test after test, round after round)
# so that all three see the same machine state. Medians are tabulated with
# bench/tabulate into docs/benchmarks.md, section "Between procs over TCP
# (issue 3)", between <!-- net:begin --> and <!-- net:end -->; the raw result
# lines go to bench/results/net-raw.txt.
#
# With --sweep, instead: Weft alone, ping-pong latency and bw streaming for
# message sizes 1 KiB-1 MiB under WEFT_NET_EAGER_LIMIT 4 KiB-256 KiB, every
# (size, limit) pair, interleaved, into <!-- netsweep:begin --> and
# <!-- netsweep:end --> of the same section; raw lines in
# bench/results/netsweep-raw.txt.
#
# Usage (from the repository root):
#   bash bench/net.sh [--rounds N] [--timeout SECONDS] [--wait SECONDS] [--quick] [--sweep]
#     --rounds N     rounds of the whole suite (default 5); cells are medians
#     --timeout S    limit for one run of one implementation (default 120)
#     --wait S       how long to wait, before each test, for others to leave the
#                    CPUs idle (default 600; 0: never wait, only record)
#     --quick        a tenth of the iterations: a smoke test, not for publishing
#     --sweep        the eager-limit sweep (Weft only) instead of the comparison
#
# A missing peer (no mpicc/launcher) or a missing Weft piece is reported on
# stderr and shows as "absent" in the table; a run that fails or times out
# shows as "failed". Nothing is skipped silently. MPICH 4.0 with UCX 1.13 over
# TCP hangs in MPI_Finalize with 6 or more processes (openucx/ucx#8738) after
# it has printed its result: a run whose results are all printed is given
# 3 s more to exit, then ended, and its results are kept (and counted).
#
# This machine is shared, and a figure taken under load is not to be quoted.
# Before each test (each size, in the sweep) the script pauses 1 s, none of
# our processes running, and measures the CPU time others use; while it is
# 10% or more, it waits (up to --wait seconds). It also waits, before the
# first round, for the 1-minute load average to come under 1.5. The load
# average is recorded before and after, with these measurements; tests that
# had to start under load are counted in the notes.
set -euo pipefail

rounds=5
per_run_timeout=120
quick=0
sweep=0
grace=3 # seconds a run may take to exit once its results are printed
wait_max=600
quiet_below=10 # percent of the CPUs others may use when a test starts
cmdline="bash bench/net.sh${*:+ $*}"
while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) rounds="${2:?--rounds needs a number}"; shift 2 ;;
	--rounds=*) rounds="${1#*=}"; shift ;;
	--timeout) per_run_timeout="${2:?--timeout needs seconds}"; shift 2 ;;
	--timeout=*) per_run_timeout="${1#*=}"; shift ;;
	--wait) wait_max="${2:?--wait needs seconds}"; shift 2 ;;
	--wait=*) wait_max="${1#*=}"; shift ;;
	--quick) quick=1; shift ;;
	--sweep) sweep=1; shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "net.sh: unknown argument $1 (try --help)" >&2; exit 2 ;;
	esac
done
case "$rounds" in '' | *[!0-9]* | 0) echo "net.sh: --rounds wants a positive integer" >&2; exit 2 ;; esac
case "$per_run_timeout" in '' | *[!0-9]* | 0) echo "net.sh: --timeout wants a positive integer" >&2; exit 2 ;; esac
case "$wait_max" in '' | *[!0-9]*) echo "net.sh: --wait wants a number of seconds" >&2; exit 2 ;; esac

if [ ! -f bench/peers/p2p.c ] || [ ! -f bench/tabulate/main.go ]; then
	echo "net.sh: run me from the repository root (bench/peers/p2p.c not found)" >&2
	exit 2
fi

OUT="$(mktemp -d "${TMPDIR:-/tmp}/weft-net.XXXXXX")"
trap 'rm -rf "$OUT"' EXIT
RESULTS=bench/results
DOC=docs/benchmarks.md
if [ "$sweep" = 1 ]; then
	RAW="$RESULTS/netsweep-raw.txt"
	begin='<!-- netsweep:begin -->'
	end='<!-- netsweep:end -->'
else
	RAW="$RESULTS/net-raw.txt"
	begin='<!-- net:begin -->'
	end='<!-- net:end -->'
fi
mkdir -p "$RESULTS" docs

note() { echo "net.sh: $*" >&2; }
notes=() # shown above the table too

# ---- build ---------------------------------------------------------------

go build -o "$OUT/tabulate" ./bench/tabulate

# status of each implementation: ok, absent or failed (build)
declare -A status
if [ "$sweep" = 1 ]; then
	impls=(weft)
else
	impls=(weft mpich openmpi)
fi

if [ ! -d bench/p2p ] || [ ! -d cmd/weft ]; then
	status[weft]=absent
	notes+=("Weft's driver ./bench/p2p or launcher ./cmd/weft does not exist: the weft column is absent.")
	note "ABSENT: ./bench/p2p or ./cmd/weft does not exist; weft shows as absent"
elif ! { go build -o "$OUT/weft" ./cmd/weft && go build -o "$OUT/weft-p2p" ./bench/p2p; } 2>"$OUT/weft-build.log"; then
	status[weft]=failed
	notes+=("Weft (./cmd/weft or ./bench/p2p) failed to build: the weft column shows failed.")
	note "ERROR: go build ./cmd/weft ./bench/p2p failed:"
	sed 's/^/    /' "$OUT/weft-build.log" >&2
else
	status[weft]=ok
fi

# build_peer NAME LAUNCHER: compiles the C twin with mpicc.NAME if it and its
# launcher exist.
build_peer() {
	local name=$1 launcher=$2
	if ! command -v "mpicc.$name" >/dev/null || ! command -v "$launcher" >/dev/null; then
		status[$name]=absent
		notes+=("Peer $name is absent (mpicc.$name or $launcher not found).")
		note "ABSENT: peer $name (mpicc.$name or $launcher not on PATH); it shows as absent"
		return
	fi
	if "mpicc.$name" -O2 -o "$OUT/p2p.$name" bench/peers/p2p.c -lpthread 2>"$OUT/$name-build.log"; then
		status[$name]=ok
	else
		status[$name]=failed
		notes+=("Peer $name: bench/peers/p2p.c failed to build with mpicc.$name.")
		note "ERROR: mpicc.$name failed to build bench/peers/p2p.c:"
		sed 's/^/    /' "$OUT/$name-build.log" >&2
	fi
}
if [ "$sweep" = 0 ]; then
	build_peer mpich mpiexec.mpich
	build_peer openmpi mpirun.openmpi
fi

# How each implementation is started with NP ranks, PP ranks per proc (weft
# only: the C MPIs have one rank per process, so their 2x4 test is 8
# processes, every pair on its own TCP connection).
# MPICH: MPIR_CVAR_NOLOCAL=1 makes ranks on one host use the netmod (UCX)
# rather than shared memory, UCX_TLS=tcp,self keeps UCX to TCP.
# Open MPI: ob1 with the tcp and self BTLs only (no vader: no shared memory);
# --oversubscribe and --bind-to none as in bench/p2p.sh (8 processes on 2 cores).
MPICH_LAUNCH=(env MPIR_CVAR_NOLOCAL=1 "UCX_TLS=tcp,self" mpiexec.mpich -n)
OMPI_LAUNCH=(mpirun.openmpi --allow-run-as-root --oversubscribe --bind-to none
	--mca pml ob1 --mca btl "tcp,self" -n)

# ---- measuring the machine -----------------------------------------------

loadavg() { cut -d' ' -f1-3 /proc/loadavg; }

# busy_others: the share of all CPUs busy during a 1 s pause in which none of
# our processes runs (everyone else's load), as a percentage.
busy_others() {
	local a b
	read -r -a a </proc/stat
	sleep 1
	read -r -a b </proc/stat
	# fields: cpu user nice system idle iowait irq softirq steal ...
	local busy=$(((b[1] + b[2] + b[3] + b[6] + b[7] + b[8]) - (a[1] + a[2] + a[3] + a[6] + a[7] + a[8])))
	local idle=$(((b[4] + b[5]) - (a[4] + a[5])))
	if [ $((busy + idle)) -le 0 ]; then
		echo "?"
	else
		echo $((100 * busy / (busy + idle)))
	fi
}

high_load() { awk -v l="$1" 'BEGIN { exit !(l > 1.5) }'; }

waited=0    # seconds spent waiting for others, in all
nloaded=0   # tests that started with others still busy
round_max=0 # the most others used before a test of this round, percent

# quiet: before a test, waits (up to --wait seconds) until others use under
# $quiet_below% of the CPUs, and records what they used.
quiet() {
	local b t0=$SECONDS
	while :; do
		b=$(busy_others)
		if [ "$b" = "?" ] || [ "$b" -lt "$quiet_below" ]; then break; fi
		if [ $((SECONDS - t0)) -ge "$wait_max" ]; then
			nloaded=$((nloaded + 1))
			note "WARNING: others keep ${b}% of the CPUs busy; the next test starts under load"
			break
		fi
		note "others keep ${b}% of the CPUs busy; waiting for them (up to ${wait_max} s)"
		sleep 10
		waited=$((waited + 11))
	done
	if [ "$b" != "?" ] && [ "$b" -gt "$round_max" ]; then round_max=$b; fi
}

# ---- running one test ------------------------------------------------------

: >"$OUT/lines.txt"
nfail=0
nhung=0

# count_results FILE IMPL: sets nres to how many result lines of IMPL FILE
# holds (bash builtins only, no fork: this runs beside a benchmark).
count_results() {
	local l
	nres=0
	while IFS= read -r l; do
		case "$l" in bench=*" impl=$2 "*" value="*) nres=$((nres + 1)) ;; esac
	done <"$1"
}

# run ROUND IMPL BENCH SIZE PAIRS NP PP ITERS METRICS [LIMIT]: runs one test
# for one implementation and appends its result lines (or failed/absent lines)
# to $OUT/lines.txt. METRICS is a comma list of metric:unit; LIMIT, if given,
# is WEFT_NET_EAGER_LIMIT for the run and lands in the lines as limit=.
run() {
	local round=$1 impl=$2 bench=$3 size=$4 pairs=$5 np=$6 pp=$7 iters=$8 metrics=$9 limit=${10:-}
	local mode=proc
	if [ "$quick" = 1 ]; then iters=$(((iters + 9) / 10)); fi
	local args=(-bench "$bench" -iters "$iters" -impl "$impl")
	case "$bench" in
	pingpong | bw) args+=(-size "$size") ;;
	msgrate) args+=(-pairs "$pairs" -mode proc) ;;
	esac
	local cmd=()
	case "$impl" in
	weft) cmd=("$OUT/weft" run -n "$np" --per-proc "$pp" "$OUT/weft-p2p") ;;
	mpich) cmd=("${MPICH_LAUNCH[@]}" "$np" "$OUT/p2p.mpich") ;;
	openmpi) cmd=("${OMPI_LAUNCH[@]}" "$np" "$OUT/p2p.openmpi") ;;
	esac
	if [ -n "$limit" ]; then cmd=(env "WEFT_NET_EAGER_LIMIT=$limit" "${cmd[@]}"); fi
	local want=${metrics//[^,]/}
	want=$((${#want} + 1))
	local got="$OUT/run.out" err="$OUT/run.err" rc=0 why="" hung=0
	: >"$got"
	if [ "${status[$impl]}" = ok ]; then
		timeout --kill-after=10 "$per_run_timeout" "${cmd[@]}" "${args[@]}" >"$got" 2>"$err" </dev/null &
		local pid=$! printed=""
		while kill -0 "$pid" 2>/dev/null; do
			if [ -z "$printed" ]; then
				count_results "$got" "$impl"
				if [ "$nres" -ge "$want" ]; then printed=$SECONDS; fi
			fi
			if [ -n "$printed" ] && [ $((SECONDS - printed)) -ge "$grace" ]; then
				hung=1
				kill -TERM "$pid" 2>/dev/null || true
				break
			fi
			sleep 0.25
		done
		wait "$pid" || rc=$?
		if [ "$hung" = 1 ]; then
			rc=0
		elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
			why="timeout"
		elif [ "$rc" != 0 ]; then
			why="exit-$rc"
		fi
	else
		why="${status[$impl]}"
	fi
	local m metric unit line summary="" extra=""
	if [ -n "$limit" ]; then
		# the protocol the limit gives this size (mpi: eager when size <= limit)
		local proto=eager
		if [ "$size" -gt "$limit" ]; then proto=three-phase; fi
		extra=" limit=$limit proto=$proto"
	fi
	if [ "$hung" = 1 ]; then extra+=" note=ended-after-result"; fi
	for m in ${metrics//,/ }; do
		metric=${m%%:*}
		unit=${m#*:}
		line=""
		if [ -z "$why" ]; then
			# the row key (size, pairs, mode) is the test's, whatever the program printed
			line=$(awk -v b="$bench" -v i="$impl" -v m="$metric" -v size="$size" -v pairs="$pairs" -v mode="$mode" '
				{ delete f; for (k = 1; k <= NF; k++) { p = index($k, "="); if (p) f[substr($k, 1, p - 1)] = substr($k, p + 1) } }
				f["bench"] == b && f["impl"] == i && f["metric"] == m && f["value"] ~ /^[0-9]+(\.[0-9]*)?([eE][-+]?[0-9]+)?$/ {
					printf "bench=%s impl=%s size=%s pairs=%s mode=%s metric=%s value=%s unit=%s\n", b, i, size, pairs, mode, m, f["value"], f["unit"]
					exit
				}
			' "$got")
			if [ -z "$line" ]; then why="no-output"; fi
		fi
		if [ -n "$line" ]; then
			echo "$line round=$round$extra" >>"$OUT/lines.txt"
			summary+=" $metric=$(sed -n 's/.* value=\([^ ]*\).*/\1/p' <<<"$line")"
		else
			local value=failed
			if [ "$why" = absent ]; then value=absent; fi
			echo "bench=$bench impl=$impl size=$size pairs=$pairs mode=$mode metric=$metric value=$value unit=$unit round=$round$extra reason=$why" >>"$OUT/lines.txt"
			summary+=" $metric=$value"
		fi
	done
	if [ "$hung" = 1 ]; then
		nhung=$((nhung + 1))
		summary+=" (did not exit; ended ${grace} s after its results)"
	fi
	note "  r$round $bench size=$size pairs=$pairs${limit:+ limit=$limit} $impl:$summary"
	if [ -n "$why" ] && [ "$why" != absent ] && [ "${status[$impl]}" = ok ]; then
		nfail=$((nfail + 1))
		note "FAILED ($why): $impl: ${cmd[*]} ${args[*]}"
		if [ -s "$err" ]; then tail -n 5 "$err" | sed 's/^/    /' >&2; fi
	fi
	return 0
}

# ---- the suite -------------------------------------------------------------

# The comparison: "bench size pairs np per-proc iters metrics". Iteration
# counts are the same for every implementation and keep one run near a
# second (TCP loopback: ~5 us one way, ~3 GB/s).
tests=(
	"pingpong 8 1 2 1 100000 latency:us"
	"pingpong 4194304 1 2 1 500 bandwidth:GB/s"
	"bw 4194304 1 2 1 20 bandwidth:GB/s"
	"msgrate 0 4 8 4 50000 rate:Mmsg/s"
)

# The sweep: every size under every limit. Ping-pong moves ~1.5 GiB each way
# (1,000-50,000 round trips), bw ~2 GiB (8-1,000 windows of 64).
limits=(4096 16384 32768 65536 131072 262144)
sizes=(1024 4096 16384 32768 65536 131072 262144 1048576)
pp_iters() { local n=$((1610612736 / $1)); echo $((n > 50000 ? 50000 : n < 1000 ? 1000 : n)); }
bw_iters() { local n=$((2147483648 / (64 * $1))); echo $((n > 1000 ? 1000 : n < 8 ? 8 : n)); }

# Before the first round, also wait (up to --wait seconds) for the 1-minute
# load average to come under 1.5: it follows others' work a minute late.
t0=$SECONDS
while high_load "$(cut -d' ' -f1 /proc/loadavg)" && [ $((SECONDS - t0)) -lt "$wait_max" ]; do
	note "load average $(loadavg) is above 1.5; waiting for it (up to ${wait_max} s)"
	sleep 15
done
waited=$((SECONDS - t0))
load_start=$(loadavg)
busy_start=$(busy_others)
note "load average at start: $load_start; others kept ${busy_start}% of the CPUs busy in a 1 s pause"
if high_load "${load_start%% *}"; then
	note "WARNING: the load average is above 1.5: figures from this run are not to be published"
fi
round_loads=()
start=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
	note "round $r of $rounds (load $(loadavg))"
	round_max=0
	if [ "$sweep" = 0 ]; then
		for t in "${tests[@]}"; do
			quiet
			# shellcheck disable=SC2086 # word splitting of the test spec is intended
			set -- $t
			for impl in "${impls[@]}"; do
				run "$r" "$impl" "$@"
			done
		done
	else
		# the limits in a different order each round, so none always runs first
		for bench in pingpong bw; do
			for size in "${sizes[@]}"; do
				quiet
				if [ "$bench" = pingpong ]; then it=$(pp_iters "$size"); m=latency:us; else it=$(bw_iters "$size"); m=bandwidth:GB/s; fi
				for ((k = 0; k < ${#limits[@]}; k++)); do
					limit=${limits[$(((k + r - 1) % ${#limits[@]}))]}
					run "$r" weft "$bench" "$size" 1 2 1 "$it" "$m" "$limit"
				done
			done
		done
	fi
	round_loads+=("r$r: ${round_max}%")
done
elapsed=$(($(date +%s) - start))
load_end=$(loadavg)
busy_end=$(busy_others)
note "load average at end: $load_end (our own runs count in it); others kept ${busy_end}% of the CPUs busy in a 1 s pause"

# ---- write results ---------------------------------------------------------

mpich_version="MPICH absent"
if command -v mpichversion >/dev/null; then
	mpich_version="$(mpichversion | sed -n 's/^MPICH Version:[[:space:]]*/MPICH /p') ($(mpichversion | sed -n 's/^MPICH Device:[[:space:]]*//p'))"
elif command -v mpiexec.mpich >/dev/null; then
	mpich_version="$(mpiexec.mpich --version 2>&1 | head -n 3 | tr -s ' \n' ' ')"
fi
if [ "$mpich_version" != "MPICH absent" ] && command -v dpkg-query >/dev/null; then
	ucx="$(dpkg-query -W -f='${Version}' libucx0 2>/dev/null || true)"
	if [ -n "$ucx" ]; then mpich_version+=" with UCX $ucx"; fi
fi
ompi_version="Open MPI absent"
if command -v mpirun.openmpi >/dev/null; then
	ompi_version="$(mpirun.openmpi --version 2>&1 | head -n 1)"
fi
cpu="$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n 1)"
when="$(date -u '+%Y-%m-%d %H:%M UTC')"

{
	echo "# bench/net.sh raw results, $when, $rounds round(s): $cmdline"
	echo "# kernel $(uname -r); $(nproc) cores; ${cpu:-unknown CPU}; $(go version)"
	if [ "$sweep" = 0 ]; then echo "# peers: $mpich_version; $ompi_version"; fi
	echo "# load average: start $load_start, end $load_end; others' CPU share in a 1 s pause: start ${busy_start}%, end ${busy_end}%; the most before a test of each round: ${round_loads[*]}; waited ${waited} s; ${nloaded} test(s) started under load"
	cat "$OUT/lines.txt"
} >"$RAW"

hung_note=""
if [ "$nhung" -gt 0 ]; then
	hung_note="$nhung run(s) printed their results and then did not exit (MPICH with UCX over TCP hangs in MPI_Finalize from 6 processes on, openucx/ucx#8738); they were ended ${grace} s later and their results kept."
fi
load_note=""
if high_load "${load_start%% *}"; then
	load_note="**The load average was above 1.5 at the start: do not quote these figures.**"
fi
if [ "$nloaded" -gt 0 ]; then
	load_note+="${load_note:+ }**$nloaded test(s) started while others used ${quiet_below}% or more of the CPUs: do not quote these figures.**"
fi

section="$OUT/section.md"
{
	if [ "$sweep" = 0 ]; then
		echo "### Weft, MPICH and Open MPI over loopback TCP"
	else
		echo "### The network eager limit: a sweep"
	fi
	echo
	echo "Written by \`$cmdline\`; do not edit between the markers."
	echo
	echo "- Date: $when; $rounds round(s), interleaved, $elapsed s in all; raw lines in \`$RAW\`"
	echo "- Machine: Linux $(uname -r), $(nproc) cores, ${cpu:-unknown CPU}; $(go version | sed 's/^go version //')"
	echo "- Load average (1, 5, 15 min): $load_start at the start, $load_end at the end (our own runs count in the latter)."
	echo "- Others' share of the CPUs in a 1 s pause with none of our processes running: ${busy_start}% before, ${busy_end}% after;"
	echo "  the most before a test of each round (after waiting for them, ${waited} s in all): ${round_loads[*]}"
	if [ "$sweep" = 0 ]; then
		echo "- Peers: $mpich_version; $ompi_version (both built from \`bench/peers/p2p.c\` with \`-O2\`)"
		echo "- Launch: weft: \`weft run -n NP --per-proc PP weft-p2p FLAGS\`; mpich: \`${MPICH_LAUNCH[*]:1} NP p2p.mpich FLAGS\`; openmpi: \`${OMPI_LAUNCH[*]} NP p2p.openmpi FLAGS\`"
	else
		echo "- Launch: \`WEFT_NET_EAGER_LIMIT=L weft run -n 2 weft-p2p -bench pingpong|bw -size S\`, every limit L for every size S, the limits in a rotating order"
	fi
	if [ "$quick" = 1 ]; then echo "- **--quick: a tenth of the iterations, a smoke test; do not quote these figures.**"; fi
	if [ -n "$load_note" ]; then echo "- $load_note"; fi
	if [ -n "$hung_note" ]; then echo "- **Note:** $hung_note"; fi
	for n in "${notes[@]+"${notes[@]}"}"; do
		echo "- **Note:** $n"
	done
	echo
	if [ "$sweep" = 0 ]; then
		echo "Tests: pingpong = blocking Send/Recv between 2 procs, one-way latency and size/latency;"
		echo "bw = 64 Isend/Irecv in flight (OSU osu_bw), 2 procs; msgrate = zero-byte messages, a reply every 256,"
		echo "4 sender/receiver pairs, rank i with rank i+4: for weft 2 procs of 4 ranks (every pair crosses between"
		echo "the procs, whose 4 pairs share one connection), for the peers 8 processes."
		echo
		"$OUT/tabulate" -peers -rounds <"$OUT/lines.txt"
	else
		echo "Weft alone, 2 procs of 1 rank. A message of S bytes goes eager when S <= L, else three-phase"
		echo "(RTS, CTS, Data into the receive): in each row the columns left of the size's own are three-phase,"
		echo "the rest eager, so same-protocol cells of a row differ only by noise."
		echo
		"$OUT/tabulate" -pivot limit <"$OUT/lines.txt"
		echo
		echo "The same runs pooled by protocol: each cell is the median of every run of the size in that"
		echo "protocol, whatever the limit, over all rounds."
		echo
		"$OUT/tabulate" -pivot proto -rounds <"$OUT/lines.txt" |
			sed '1s/(each cell is the median over the rounds;/(each cell is the median over every limit and round;/'
	fi
} >"$section"

# The section: a heading of its own with both pairs of markers; made at the
# end of the document if missing.
heading='## Between procs over TCP (issue 3)'
if [ ! -f "$DOC" ]; then
	printf '# Benchmarks\n' >"$DOC"
fi
if ! grep -qF "$begin" "$DOC" || ! grep -qF "$end" "$DOC"; then
	note "$DOC has no $begin / $end markers; adding them at its end"
	if ! grep -qxF "$heading" "$DOC"; then printf '\n%s\n' "$heading" >>"$DOC"; fi
	printf '\n%s\n%s\n' "$begin" "$end" >>"$DOC"
fi
awk -v begin="$begin" -v end="$end" -v section="$section" '
	$0 == begin { print; while ((getline l < section) > 0) print l; skip = 1; next }
	$0 == end { skip = 0 }
	!skip { print }
' "$DOC" >"$OUT/doc.md"
cat "$OUT/doc.md" >"$DOC"

cat "$section"
note "wrote $DOC and $RAW ($nfail failed run(s), $nhung ended after their results, $elapsed s)"
