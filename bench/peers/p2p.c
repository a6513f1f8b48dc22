/*
 * p2p.c: the C twin of Weft's point-to-point suite (bench/p2p), which
 * `weft bench p2p` builds with each C MPI it finds (mpicc.mpich,
 * mpicc.openmpi: `mpicc -O2 -o p2p.NAME p2p.c`) and runs beside Weft in the
 * same invocation, so that every figure Weft publishes stands beside the
 * peers' from the same run.
 *
 * MPI C API only, C99. Flags are the Go body's (Go's flag syntax: -name value,
 * -name=value, --name value):
 *
 *   -bench pingpong -size S -iters N   2 ranks, blocking Send/Recv
 *   -bench bw       -size S -iters N   2 ranks, windows of 64 Isend/Irecv, each acknowledged (osu_bw)
 *   -bench bibw     -size S -iters N   the same both ways at once (osu_bibw)
 *   -bench oneway   -size S -iters N   2 ranks, rank 0 keeps sending to rank 1
 *                                      (TMPI's one-way send-recv)
 *   -bench msgrate  -pairs K -iters N  2K ranks, rank i sends zero-byte
 *                                      messages to rank i+K, a reply every 256
 *
 * Every test runs N/10 iterations untimed, then N between barriers. Rank 0
 * prints one line per result on stdout, as bench.Report does for Weft:
 *   bench=pingpong impl=mpich size=8 metric=latency value=0.19 unit=us
 * metric: latency or time (us), bandwidth (GB/s, 1e9 bytes/s), rate (Mmsg/s).
 * Errors go to stderr and end the job with a non-zero status.
 */
#include "twin.h"

#define WINDOW 64
#define MSGRATE_BATCH 256

static const char *opt_bench = "pingpong";
static long opt_size = 8;
static long opt_iters = 0;
static long opt_pairs = 1;

static int world_rank, world_size;

static void parse_args(int argc, char **argv)
{
    twin_name = "p2p";
    twin_usage = "-bench pingpong|bw|bibw|oneway|msgrate -iters N [-size S] [-pairs K]";
    const struct twin_flag flags[] = {
        {"bench", &opt_bench, NULL, NULL, 0, NULL},
        {"size", NULL, &opt_size, NULL, 0, NULL},
        {"iters", NULL, &opt_iters, NULL, 1, NULL},
        {"pairs", NULL, &opt_pairs, NULL, 1, NULL},
    };
    twin_parse(argc, argv, flags, sizeof flags / sizeof flags[0]);
    if (opt_iters < 1)
        usage_exit("-iters N (at least 1) is required");
    if (opt_size > 0x7fffffffL)
        usage_exit("-size must fit in an int");
}

static void result(const char *metric, double value, const char *unit)
{
    if (world_rank != 0)
        return;
    if (strcmp(opt_bench, "msgrate") == 0)
        printf("bench=%s impl=%s pairs=%ld metric=%s value=%.6g unit=%s\n", opt_bench, IMPL,
               opt_pairs, metric, value, unit);
    else
        printf("bench=%s impl=%s size=%ld metric=%s value=%.6g unit=%s\n", opt_bench, IMPL,
               opt_size, metric, value, unit);
    fflush(stdout);
}

static char *xmalloc(size_t n)
{
    char *p = malloc(n ? n : 1);
    if (!p)
        die("out of memory");
    memset(p, 'a', n ? n : 1);
    return p;
}

static void pingpong(char *buf, int n, long iters)
{
    int peer = 1 - world_rank;
    for (long i = 0; i < iters; i++) {
        if (world_rank == 0) {
            check(MPI_Send(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD), "MPI_Send");
            check(MPI_Recv(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        } else {
            check(MPI_Recv(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
            check(MPI_Send(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD), "MPI_Send");
        }
    }
}

/* stream posts windows of WINDOW receives and sends (rank 1 receives and
 * rank 0 sends, or both do both when bi), each completed by MPI_Waitall and,
 * one way, acknowledged by the receiver as in osu_bw.
 * One buffer per direction for the whole window, as OSU's tests do. */
static int stream_bi;
static void stream(char *buf, int n, long iters)
{
    MPI_Request reqs[2 * WINDOW];
    /* a real status array, as osu_bw has (MPI_STATUSES_IGNORE trips a gcc
     * -Wstringop-overflow false positive with MPICH's headers) */
    MPI_Status stats[2 * WINDOW];
    char *rbuf = buf + n;
    char ack[4] = {0};
    int peer = 1 - world_rank;
    for (long i = 0; i < iters; i++) {
        int k = 0;
        for (int w = 0; w < WINDOW; w++) {
            if (stream_bi || world_rank == 1)
                check(MPI_Irecv(rbuf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &reqs[k++]), "MPI_Irecv");
            if (stream_bi || world_rank == 0)
                check(MPI_Isend(buf, n, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &reqs[k++]), "MPI_Isend");
        }
        check(MPI_Waitall(k, reqs, stats), "MPI_Waitall");
        if (stream_bi)
            continue;
        /* osu_bw's acknowledgement: the sender starts a window once the
         * receiver has had the last. */
        if (world_rank == 0)
            check(MPI_Recv(ack, 4, MPI_BYTE, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        else
            check(MPI_Send(ack, 4, MPI_BYTE, peer, 1, MPI_COMM_WORLD), "MPI_Send");
    }
}

static void oneway(char *buf, int n, long iters)
{
    for (long i = 0; i < iters; i++) {
        if (world_rank == 0)
            check(MPI_Send(buf, n, MPI_BYTE, 1, 0, MPI_COMM_WORLD), "MPI_Send");
        else
            check(MPI_Recv(buf, n, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    }
}

/* msgrate sends iters zero-byte messages from rank i < K to rank i+K, the
 * receiver answering every MSGRATE_BATCH of them. */
static void msgrate(char *buf, int n, long iters)
{
    (void)n;
    int k = (int)opt_pairs;
    int sender = world_rank < k;
    int peer = sender ? world_rank + k : world_rank - k;
    for (long i = 1; i <= iters; i++) {
        if (sender) {
            check(MPI_Send(buf, 0, MPI_BYTE, peer, 0, MPI_COMM_WORLD), "MPI_Send");
            if (i % MSGRATE_BATCH == 0)
                check(MPI_Recv(buf, 0, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
        } else {
            check(MPI_Recv(buf, 0, MPI_BYTE, peer, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
            if (i % MSGRATE_BATCH == 0)
                check(MPI_Send(buf, 0, MPI_BYTE, peer, 0, MPI_COMM_WORLD), "MPI_Send");
        }
    }
}

/* timed runs test for iters/10 iterations untimed, then for iters between
 * barriers, and returns the seconds of the latter. */
static double timed(void (*test)(char *, int, long), char *buf, int n)
{
    long warm = opt_iters / 10 ? opt_iters / 10 : 1;
    test(buf, n, warm);
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double t0 = MPI_Wtime();
    test(buf, n, opt_iters);
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    return MPI_Wtime() - t0;
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    check(MPI_Init(&argc, &argv), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    twin_rank = world_rank;
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);

    int msgrate_test = strcmp(opt_bench, "msgrate") == 0;
    int want = msgrate_test ? 2 * (int)opt_pairs : 2;
    if (world_size != want) {
        char msg[128];
        snprintf(msg, sizeof msg, "-bench %s needs %d ranks, the job has %d", opt_bench, want,
                 world_size);
        die(msg);
    }
    int n = (int)opt_size;
    char *buf = xmalloc(2 * (size_t)opt_size);
    double iters = (double)opt_iters;
    if (strcmp(opt_bench, "pingpong") == 0) {
        double oneway_s = timed(pingpong, buf, n) / (2 * iters);
        result("latency", oneway_s * 1e6, "us");
        result("bandwidth", (double)opt_size / oneway_s / 1e9, "GB/s");
    } else if (strcmp(opt_bench, "bw") == 0 || strcmp(opt_bench, "bibw") == 0) {
        stream_bi = strcmp(opt_bench, "bibw") == 0;
        double s = timed(stream, buf, n);
        double bytes = (double)opt_size * WINDOW * iters * (stream_bi ? 2 : 1);
        result("bandwidth", bytes / s / 1e9, "GB/s");
    } else if (strcmp(opt_bench, "oneway") == 0) {
        double per = timed(oneway, buf, n) / iters;
        result("time", per * 1e6, "us");
        result("bandwidth", (double)opt_size / per / 1e9, "GB/s");
    } else if (msgrate_test) {
        double s = timed(msgrate, buf, n);
        result("rate", (double)opt_pairs * iters / s / 1e6, "Mmsg/s");
    } else {
        die("unknown -bench (want pingpong, bw, bibw, oneway or msgrate)");
    }
    free(buf);
    MPI_Finalize();
    return 0;
}
