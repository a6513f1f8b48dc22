/*
 * p2p.c: the C "peer twin" of Weft's point-to-point benchmarks (bench/p2p).
 *
 * The same program is built against each C MPI we compare with, so every
 * figure Weft publishes is a ratio against a peer measured in the same run:
 *
 *   mpicc.mpich   -O2 -o p2p.mpich   bench/peers/p2p.c -lpthread
 *   mpicc.openmpi -O2 -o p2p.openmpi bench/peers/p2p.c -lpthread
 *
 * MPI C API only, C99 (plus POSIX threads). Flags mirror the Go driver's
 * (Go's flag syntax: -name value, -name=value, --name value):
 *
 *   -bench pingpong   -size S [-iters N]      2 ranks, blocking Send/Recv
 *   -bench bw         -size S [-iters N]      2 ranks, OSU-style window of 64
 *   -bench msgrate    -pairs K -mode proc|thread [-iters N]
 *                     zero-byte messages, a reply every 256 messages;
 *                     proc: 2K ranks, rank i sends to rank i+K;
 *                     thread: 2 ranks, K threads each, MPI_THREAD_MULTIPLE
 *   -bench latency_mt -threads R [-iters N]   OSU latency_mt: 1 sender thread,
 *                     R receiver threads, 8-byte messages
 *   -impl NAME        the impl= field of the result lines (default "c")
 *
 * Rank 0 prints one line per result on stdout, for example
 *   bench=pingpong impl=mpich size=8 pairs=1 mode=proc metric=latency value=0.190 unit=us
 * metric is latency (us), bandwidth (GB/s, 1e9 bytes/s) or rate (Mmsg/s).
 * latency_mt reports its receiver-thread count R as pairs=R mode=thread.
 * Errors go to stderr and end the job with a non-zero status.
 */
#define _POSIX_C_SOURCE 200809L

#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BW_WINDOW 64
#define MSGRATE_BATCH 256
#define LATMT_SIZE 8
#define MAX_THREADS 256

static const char *opt_bench = "pingpong";
static const char *opt_mode = "proc";
static const char *opt_impl = "c";
static long opt_size = 8;
static long opt_iters = -1; /* -1: choose a default */
static int opt_pairs = 1;
static int opt_threads = 2;

static int world_rank, world_size;

static void die(const char *msg)
{
    fprintf(stderr, "p2p[%d]: %s\n", world_rank, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

static void check(int rc, const char *what)
{
    if (rc != MPI_SUCCESS) {
        char err[MPI_MAX_ERROR_STRING + 64];
        char msg[MPI_MAX_ERROR_STRING];
        int len = 0;
        MPI_Error_string(rc, msg, &len);
        snprintf(err, sizeof err, "%s failed: %s", what, msg);
        die(err);
    }
}

static void usage_exit(const char *prog, const char *why)
{
    fprintf(stderr,
            "%s: %s\nusage: %s -bench pingpong|bw|msgrate|latency_mt [-size S] [-iters N]\n"
            "       [-pairs K] [-mode proc|thread] [-threads R] [-impl NAME]\n",
            prog, why, prog);
    exit(2);
}

static long parse_long(const char *prog, const char *name, const char *v, long min)
{
    char *end = NULL;
    long x = strtol(v, &end, 10);
    if (end == v || *end != '\0' || x < min) {
        char why[256];
        snprintf(why, sizeof why, "bad value %s for -%s", v, name);
        usage_exit(prog, why);
    }
    return x;
}

/* parse_args accepts Go's flag syntax: -name value, --name value, -name=value. */
static void parse_args(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-')
            usage_exit(argv[0], "unexpected argument");
        a++;
        if (a[0] == '-')
            a++;
        char name[64];
        const char *val;
        const char *eq = strchr(a, '=');
        if (eq) {
            size_t n = (size_t)(eq - a);
            if (n >= sizeof name)
                usage_exit(argv[0], "flag name too long");
            memcpy(name, a, n);
            name[n] = '\0';
            val = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", a);
            if (strcmp(name, "h") == 0 || strcmp(name, "help") == 0)
                usage_exit(argv[0], "help");
            if (i + 1 >= argc)
                usage_exit(argv[0], "flag needs a value");
            val = argv[++i];
        }
        if (strcmp(name, "bench") == 0)
            opt_bench = val;
        else if (strcmp(name, "mode") == 0)
            opt_mode = val;
        else if (strcmp(name, "impl") == 0)
            opt_impl = val;
        else if (strcmp(name, "size") == 0)
            opt_size = parse_long(argv[0], name, val, 0);
        else if (strcmp(name, "iters") == 0)
            opt_iters = parse_long(argv[0], name, val, 1);
        else if (strcmp(name, "pairs") == 0)
            opt_pairs = (int)parse_long(argv[0], name, val, 1);
        else if (strcmp(name, "threads") == 0)
            opt_threads = (int)parse_long(argv[0], name, val, 1);
        else {
            char why[128];
            snprintf(why, sizeof why, "unknown flag -%s", name);
            usage_exit(argv[0], why);
        }
    }
    if (opt_pairs > MAX_THREADS || opt_threads > MAX_THREADS)
        usage_exit(argv[0], "too many pairs or threads");
}

static void result(const char *bench, long size, int pairs, const char *mode,
                   const char *metric, double value, const char *unit)
{
    if (world_rank != 0)
        return;
    printf("bench=%s impl=%s size=%ld pairs=%d mode=%s metric=%s value=%.3f unit=%s\n",
           bench, opt_impl, size, pairs, mode, metric, value, unit);
    fflush(stdout);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory");
    memset(p, 'a', n ? n : 1);
    return p;
}

static void need_ranks(int n)
{
    if (world_size != n) {
        char msg[128];
        snprintf(msg, sizeof msg, "-bench %s needs exactly %d ranks, got %d", opt_bench, n,
                 world_size);
        die(msg);
    }
}

/* ---- pingpong ---------------------------------------------------------- */

static void pingpong_loop(char *buf, int n, long iters)
{
    for (long i = 0; i < iters; i++) {
        if (world_rank == 0) {
            check(MPI_Send(buf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD), "MPI_Send");
            check(MPI_Recv(buf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        } else {
            check(MPI_Recv(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
            check(MPI_Send(buf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD), "MPI_Send");
        }
    }
}

static void bench_pingpong(void)
{
    need_ranks(2);
    long iters = opt_iters;
    if (iters < 0) {
        iters = 100000;
        if (opt_size > 8192) {
            iters = 1000000000L / opt_size; /* about 2 GB moved each way */
            if (iters < 200)
                iters = 200;
        }
    }
    int n = (int)opt_size;
    char *buf = xmalloc((size_t)opt_size);
    pingpong_loop(buf, n, iters / 10);
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double t0 = MPI_Wtime();
    pingpong_loop(buf, n, iters);
    double t1 = MPI_Wtime();
    double oneway = (t1 - t0) / (2.0 * (double)iters);
    result("pingpong", opt_size, 1, "proc", "latency", oneway * 1e6, "us");
    result("pingpong", opt_size, 1, "proc", "bandwidth", (double)opt_size / oneway / 1e9, "GB/s");
    free(buf);
}

/* ---- bw (OSU osu_bw style) --------------------------------------------- */

static void bw_loop(char *buf, int n, long iters)
{
    MPI_Request reqs[BW_WINDOW];
    /* a real status array, as osu_bw has (MPI_STATUSES_IGNORE trips a gcc
     * -Wstringop-overflow false positive with MPICH's headers) */
    MPI_Status stats[BW_WINDOW];
    for (long i = 0; i < iters; i++) {
        for (int w = 0; w < BW_WINDOW; w++) {
            if (world_rank == 0)
                check(MPI_Isend(buf, n, MPI_BYTE, 1, 100, MPI_COMM_WORLD, &reqs[w]), "MPI_Isend");
            else
                check(MPI_Irecv(buf, n, MPI_BYTE, 0, 100, MPI_COMM_WORLD, &reqs[w]), "MPI_Irecv");
        }
        check(MPI_Waitall(BW_WINDOW, reqs, stats), "MPI_Waitall");
    }
    char ack[4] = {0};
    if (world_rank == 0)
        check(MPI_Recv(ack, 4, MPI_BYTE, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    else
        check(MPI_Send(ack, 4, MPI_BYTE, 0, 101, MPI_COMM_WORLD), "MPI_Send");
}

static void bench_bw(void)
{
    need_ranks(2);
    long iters = opt_iters;
    if (iters < 0) {
        /* about 4 GiB per run at large sizes, 640000 messages at small ones */
        iters = (1L << 32) / ((long)BW_WINDOW * (opt_size ? opt_size : 1));
        if (iters > 10000)
            iters = 10000;
        if (iters < 16)
            iters = 16;
    }
    int n = (int)opt_size;
    /* One buffer for the whole window, as OSU does. */
    char *buf = xmalloc((size_t)opt_size);
    long warm = iters / 10 ? iters / 10 : 1;
    bw_loop(buf, n, warm);
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double t0 = MPI_Wtime();
    bw_loop(buf, n, iters);
    double t1 = MPI_Wtime();
    double bytes = (double)opt_size * BW_WINDOW * (double)iters;
    result("bw", opt_size, 1, "proc", "bandwidth", bytes / (t1 - t0) / 1e9, "GB/s");
    free(buf);
}

/* ---- msgrate ----------------------------------------------------------- */

/* msgrate_sender sends iters zero-byte messages and waits for a zero-byte
 * reply after every MSGRATE_BATCH of them. */
static void msgrate_sender(int peer, int tag, long iters)
{
    char dummy = 0;
    for (long i = 0; i < iters; i++) {
        check(MPI_Send(&dummy, 0, MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
        if ((i + 1) % MSGRATE_BATCH == 0)
            check(MPI_Recv(&dummy, 0, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                  "MPI_Recv");
    }
}

static void msgrate_receiver(int peer, int tag, long iters)
{
    char dummy = 0;
    for (long i = 0; i < iters; i++) {
        check(MPI_Recv(&dummy, 0, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Recv");
        if ((i + 1) % MSGRATE_BATCH == 0)
            check(MPI_Send(&dummy, 0, MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
    }
}

struct worker {
    pthread_t tid;
    int index;
    long iters;
};

static pthread_barrier_t start_gate;

static void *msgrate_thread(void *arg)
{
    struct worker *w = arg;
    pthread_barrier_wait(&start_gate);
    if (world_rank == 0)
        msgrate_sender(1, w->index, w->iters);
    else
        msgrate_receiver(0, w->index, w->iters);
    return NULL;
}

/* run_threads starts n workers running fn, lets them go after an
 * MPI_Barrier (recording MPI_Wtime just after it in *t0 when t0 is not
 * NULL), and returns once they have all finished. */
static void run_threads(int n, long iters, void *(*fn)(void *), double *t0)
{
    struct worker w[MAX_THREADS];
    if (pthread_barrier_init(&start_gate, NULL, (unsigned)n + 1) != 0)
        die("pthread_barrier_init failed");
    for (int t = 0; t < n; t++) {
        w[t].index = t;
        w[t].iters = iters;
        if (pthread_create(&w[t].tid, NULL, fn, &w[t]) != 0)
            die("pthread_create failed");
    }
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    if (t0)
        *t0 = MPI_Wtime();
    pthread_barrier_wait(&start_gate);
    for (int t = 0; t < n; t++)
        pthread_join(w[t].tid, NULL);
    pthread_barrier_destroy(&start_gate);
}

static double max_elapsed(double elapsed)
{
    double m = 0;
    check(MPI_Reduce(&elapsed, &m, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "MPI_Reduce");
    return m;
}

static void bench_msgrate(void)
{
    int k = opt_pairs;
    int thread = strcmp(opt_mode, "thread") == 0;
    if (!thread && strcmp(opt_mode, "proc") != 0)
        die("-mode must be proc or thread");
    need_ranks(thread ? 2 : 2 * k);
    long iters = opt_iters;
    if (iters < 0)
        iters = thread ? 50000 : 500000;
    long warm = iters / 10 ? iters / 10 : 1;

    /* round 0 is an untimed warm-up on the same code path */
    for (int round = 0; round < 2; round++) {
        long n = round == 0 ? warm : iters;
        double t0 = 0, t1;
        if (thread) {
            /* the workers start right after run_threads' barrier */
            run_threads(k, n, msgrate_thread, &t0);
        } else {
            check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
            t0 = MPI_Wtime();
            if (world_rank < k)
                msgrate_sender(world_rank + k, 0, n);
            else
                msgrate_receiver(world_rank - k, 0, n);
        }
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        t1 = MPI_Wtime();
        double el = max_elapsed(t1 - t0);
        if (round == 1)
            result("msgrate", 0, k, thread ? "thread" : "proc", "rate",
                   (double)k * (double)n / el / 1e6, "Mmsg/s");
    }
}

/* ---- latency_mt (OSU osu_latency_mt style) ----------------------------- */

static void *latmt_thread(void *arg)
{
    struct worker *w = arg;
    char buf[LATMT_SIZE];
    memset(buf, 'a', sizeof buf);
    pthread_barrier_wait(&start_gate);
    for (long i = 0; i < w->iters; i++) {
        check(MPI_Recv(buf, LATMT_SIZE, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Recv");
        check(MPI_Send(buf, LATMT_SIZE, MPI_BYTE, 0, 1, MPI_COMM_WORLD), "MPI_Send");
    }
    return NULL;
}

static void latmt_sender(long n)
{
    char buf[LATMT_SIZE];
    memset(buf, 'a', sizeof buf);
    for (long i = 0; i < n; i++) {
        check(MPI_Send(buf, LATMT_SIZE, MPI_BYTE, 1, 1, MPI_COMM_WORLD), "MPI_Send");
        check(MPI_Recv(buf, LATMT_SIZE, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
              "MPI_Recv");
    }
}

static void bench_latency_mt(void)
{
    need_ranks(2);
    int r = opt_threads;
    long iters = opt_iters;
    if (iters < 0)
        iters = 20000;
    long warm = iters / 10 ? iters / 10 : 1;
    for (int round = 0; round < 2; round++) {
        long n = round == 0 ? warm : iters;
        double t0 = 0, t1 = 0;
        if (world_rank == 0) {
            check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
            t0 = MPI_Wtime();
            latmt_sender((long)r * n);
            t1 = MPI_Wtime();
        } else {
            run_threads(r, n, latmt_thread, NULL);
        }
        if (round == 1)
            result("latency_mt", LATMT_SIZE, r, "thread", "latency",
                   (t1 - t0) / (2.0 * (double)r * (double)n) * 1e6, "us");
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    }
}

/* ---- main -------------------------------------------------------------- */

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    int want_mt = strcmp(opt_bench, "latency_mt") == 0 ||
                  (strcmp(opt_bench, "msgrate") == 0 && strcmp(opt_mode, "thread") == 0);
    if (want_mt) {
        int provided = MPI_THREAD_SINGLE;
        check(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &world_size);
        if (provided < MPI_THREAD_MULTIPLE) {
            char msg[128];
            snprintf(msg, sizeof msg,
                     "MPI_THREAD_MULTIPLE not provided (got level %d); -bench %s needs it",
                     provided, opt_bench);
            die(msg);
        }
    } else {
        check(MPI_Init(&argc, &argv), "MPI_Init");
        MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
        MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (opt_size > 0x7fffffffL)
        die("-size must fit in an int");

    if (strcmp(opt_bench, "pingpong") == 0)
        bench_pingpong();
    else if (strcmp(opt_bench, "bw") == 0)
        bench_bw();
    else if (strcmp(opt_bench, "msgrate") == 0)
        bench_msgrate();
    else if (strcmp(opt_bench, "latency_mt") == 0)
        bench_latency_mt();
    else
        die("unknown -bench (want pingpong, bw, msgrate or latency_mt)");

    MPI_Finalize();
    return 0;
}
