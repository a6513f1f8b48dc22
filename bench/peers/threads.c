/*
 * threads.c: the C "peer twin" of Weft's threads suite (bench/threads): Thakur
 * and Gropp's tests of multithreaded MPI communication and OSU's latency_mt,
 * with the same flags and the same result lines as the Weft body.
 *
 *   mpicc.mpich   -O2 -o threads.mpich   bench/peers/threads.c -lpthread
 *   mpicc.openmpi -O2 -o threads.openmpi bench/peers/threads.c -lpthread
 *
 * MPI C API, C11 and POSIX threads. Flags (Go's flag syntax: -name value,
 * -name=value, --name value):
 *
 *   -test overhead|latency|bw|msgrate|shortlong|overlap|allreduce|hidden|latency_mt
 *   -mode P|T      P: one single-threaded process per stream, MPI_Init;
 *                  T: threads of one process, MPI_Init_thread(MPI_THREAD_MULTIPLE)
 *   -size S        message bytes (-1: the test's default)
 *   -iters N       iterations (0: the test's default)
 *   -pairs K       overhead (1), latency, bw, msgrate: pairs; P: 2K ranks, rank i
 *                  with rank i+K; T: 2 ranks, thread t with thread t (tag t)
 *   -threads R     latency_mt: receiving threads
 *   -comms K       allreduce: communicators of 2 ranks (P: 2K ranks; T: 2 ranks)
 *   -workers W     hidden: computing threads (ranks) per node, 2 nodes
 *   -work US       overlap: microseconds of computation per iteration
 *   -impl NAME     the impl= field of the result lines (default: the MPI built with)
 *
 * Rank 0 prints the result lines on stdout, for example
 *   bench=threads impl=mpich test=msgrate mode=T pairs=4 size=0 metric=rate value=1.2 unit=Mmsg/s
 * Each test runs a tenth of its iterations untimed first; times are rank 0's
 * between two MPI_Barriers. Errors go to stderr and end the job (MPI_Abort).
 */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "twin.h"

#define MAX_STREAMS 64
#define BATCH 256       /* msgrate: a reply every BATCH messages */
#define ALONE_SECS 0.03 /* hidden: how long the workers compute alone */

enum { TAG_SHORT = 1, TAG_LONG, TAG_LONG_TIME, TAG_HELPER, TAG_STOP };

static const char *opt_test = "";
static const char *opt_mode = "";
static const char *opt_impl = IMPL;
static long opt_size = -1;
static long opt_iters = 0;
static long opt_pairs = 1, opt_threads = 2, opt_comms = 2, opt_workers = 1, opt_work = 100;

static int rank, nranks, threaded;
static char row[256]; /* the result lines' fields from test= to before metric= */

static void parse_args(int argc, char **argv)
{
    twin_name = "threads";
    twin_usage = "-test NAME [-mode P|T] [-size S] [-iters N] [-pairs K]\n"
                 "       [-threads R] [-comms K] [-workers W] [-work US] [-impl NAME]";
    const struct twin_flag flags[] = {
        {"test", &opt_test, NULL, NULL, 0, NULL},
        {"mode", &opt_mode, NULL, NULL, 0, NULL},
        {"impl", &opt_impl, NULL, NULL, 0, NULL},
        {"size", NULL, &opt_size, NULL, -1, NULL},
        {"iters", NULL, &opt_iters, NULL, 0, NULL},
        {"pairs", NULL, &opt_pairs, NULL, 1, NULL},
        {"threads", NULL, &opt_threads, NULL, 1, NULL},
        {"comms", NULL, &opt_comms, NULL, 1, NULL},
        {"workers", NULL, &opt_workers, NULL, 1, NULL},
        {"work", NULL, &opt_work, NULL, 0, NULL},
    };
    twin_parse(argc, argv, flags, sizeof flags / sizeof flags[0]);
}

static int is(const char *test) { return strcmp(opt_test, test) == 0; }

/* settle fills in the test's defaults, checks the flags as the Weft body does,
 * and writes the row; it returns the ranks the test needs (0: any, at least 2). */
static int settle(void)
{
    static const struct {
        const char *name;
        long size, iters;
    } tests[] = {{"overhead", 8, 20000},       {"latency", 8, 10000},   {"bw", 1 << 20, 200},
                 {"msgrate", 0, 100000},       {"shortlong", 8 << 20, 400},
                 {"overlap", 64 << 10, 200},   {"allreduce", 8, 2000},  {"hidden", 64 << 10, 200},
                 {"latency_mt", 8, 20000}};
    int found = -1;
    for (size_t k = 0; k < sizeof tests / sizeof tests[0]; k++)
        if (is(tests[k].name))
            found = (int)k;
    if (found < 0)
        usage_exit("-test: want overhead, latency, bw, msgrate, shortlong, overlap, "
                         "allreduce, hidden or latency_mt");
    if (*opt_mode == '\0')
        opt_mode = is("latency_mt") ? "T" : "P";
    if (strcmp(opt_mode, "P") != 0 && strcmp(opt_mode, "T") != 0)
        usage_exit("-mode: want P (processes) or T (threads)");
    threaded = strcmp(opt_mode, "T") == 0;
    if (!threaded && is("latency_mt"))
        usage_exit("-mode P: latency_mt runs threads only (mode T)");
    if (opt_size == -1)
        opt_size = tests[found].size;
    if (opt_iters == 0)
        opt_iters = tests[found].iters;
    long streams[] = {opt_pairs, opt_threads, opt_comms, opt_workers};
    for (int k = 0; k < 4; k++)
        if (streams[k] < 1 || streams[k] > MAX_STREAMS)
            usage_exit("-pairs, -threads, -comms and -workers: want 1 to 64");
    if (opt_size < 0 || opt_size > 0x7fffffffL)
        usage_exit("-size: want a number of bytes that fits in an int (or -1)");
    if (opt_iters < 1)
        usage_exit("-iters: want at least 1");
    if (opt_work < 0 || (opt_work == 0 && is("overlap")))
        usage_exit("-work: want a positive number of microseconds");
    if ((is("allreduce") || is("hidden")) && (opt_size == 0 || opt_size % 8 != 0))
        usage_exit("-size: allreduce and hidden reduce doubles, want a positive multiple of 8");
    if (is("overhead") && opt_pairs != 1)
        usage_exit("-pairs: overhead runs one pair");
    if (is("shortlong") && opt_size == 0)
        usage_exit("-size 0: shortlong needs a long message");

    int n = snprintf(row, sizeof row, "test=%s mode=%s", opt_test, opt_mode);
    if (is("latency") || is("bw") || is("msgrate"))
        n += snprintf(row + n, sizeof row - n, " pairs=%ld", opt_pairs);
    else if (is("latency_mt"))
        n += snprintf(row + n, sizeof row - n, " threads=%ld", opt_threads);
    else if (is("allreduce"))
        n += snprintf(row + n, sizeof row - n, " comms=%ld", opt_comms);
    else if (is("hidden"))
        n += snprintf(row + n, sizeof row - n, " workers=%ld", opt_workers);
    n += snprintf(row + n, sizeof row - n, " size=%ld", opt_size);
    if (is("overlap"))
        snprintf(row + n, sizeof row - n, " work=%ld", opt_work);

    if (is("overlap"))
        return 0;
    if (is("overhead") || is("latency_mt"))
        return 2;
    if (is("shortlong"))
        return threaded ? 3 : 4;
    long k = is("allreduce") ? opt_comms : is("hidden") ? opt_workers + 1 : opt_pairs;
    return threaded ? 2 : (int)(2 * k);
}

/* result prints one result line on rank 0; extra holds fields after the row. */
static void result(const char *extra, const char *metric, double value, const char *unit)
{
    if (rank != 0)
        return;
    printf("bench=threads impl=%s %s%s metric=%s value=%.6g unit=%s\n", opt_impl, row, extra,
           metric, value, unit);
}

static void *xmalloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    if (!p)
        die("out of memory");
    return p;
}

/* stamp marks buf as message i; check_stamp verifies what a receive got. */
static void stamp(char *buf, int n, long i)
{
    if (n > 0)
        buf[0] = (char)i;
}

static void check_stamp(const MPI_Status *st, const char *buf, int n, long i)
{
    int got = -1;
    MPI_Get_count(st, MPI_BYTE, &got);
    if (got != n || (n > 0 && buf[0] != (char)i)) {
        char msg[160];
        snprintf(msg, sizeof msg, "message %ld from rank %d: %d bytes, stamp %d (want %d bytes, stamp %d)",
                 i, st->MPI_SOURCE, got, n > 0 ? (unsigned char)buf[0] : -1, n, (unsigned char)i);
        die(msg);
    }
}

/* recv_stamped receives message i of a stream into buf and checks it. */
static void recv_stamped(char *buf, int n, int peer, int tag, long i)
{
    MPI_Status st;
    check(MPI_Recv(buf, n, MPI_BYTE, peer, tag, MPI_COMM_WORLD, &st), "MPI_Recv");
    check_stamp(&st, buf, n, i);
}

/* ---- teams of threads --------------------------------------------------- */

typedef void (*stream_fn)(int t, long n);

struct member {
    pthread_t tid;
    int t;
    long n;
    stream_fn fn;
};

static pthread_barrier_t gate;

static void *member_main(void *arg)
{
    struct member *m = arg;
    pthread_barrier_wait(&gate);
    m->fn(m->t, m->n);
    return NULL;
}

/* run_team runs fn(t, n) for t < k on k threads created beforehand and released
 * together just after an MPI_Barrier, whose end it records in *start (when not
 * NULL), and returns once all have finished; k == 0 runs fn(0, n) on the
 * calling thread after the barrier. */
static void run_team(int k, long n, stream_fn fn, double *start)
{
    struct member m[MAX_STREAMS + 1];
    if (k > 0 && pthread_barrier_init(&gate, NULL, (unsigned)k + 1) != 0)
        die("pthread_barrier_init failed");
    for (int t = 0; t < k; t++) {
        m[t] = (struct member){.t = t, .n = n, .fn = fn};
        if (pthread_create(&m[t].tid, NULL, member_main, &m[t]) != 0)
            die("pthread_create failed");
    }
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    if (start)
        *start = MPI_Wtime();
    if (k == 0) {
        fn(0, n);
        return;
    }
    pthread_barrier_wait(&gate);
    for (int t = 0; t < k; t++)
        pthread_join(m[t].tid, NULL);
    pthread_barrier_destroy(&gate);
}

/* timed runs the team on n/10 iterations untimed, then on n, and returns the
 * seconds from the end of the starting barrier to the end of a closing one. */
static double timed(int k, long n, stream_fn fn)
{
    double start;
    run_team(k, n / 10 ? n / 10 : 1, fn, NULL);
    run_team(k, n, fn, &start);
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    return MPI_Wtime() - start;
}

/* pair_of gives stream t's end of its pair: with processes rank i and i+K are
 * pair i (tag 0), with threads thread t of rank 0 and of rank 1 (tag t). */
static void pair_of(int t, int *first, int *peer, int *tag)
{
    if (threaded) {
        *first = rank == 0, *peer = 1 - rank, *tag = t;
    } else {
        *first = rank < opt_pairs, *peer = (int)((rank + opt_pairs) % nranks), *tag = 0;
    }
}

/* ---- overhead, latency, bw, msgrate ------------------------------------ */

/* the loops of the pair tests, on one end's buffer of -size bytes */
static void pingpong_loop(char *buf, int size, int first, int peer, int tag, long n)
{
    for (long i = 0; i < n; i++) {
        if (first) {
            stamp(buf, size, i);
            check(MPI_Send(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
        }
        recv_stamped(buf, size, peer, tag, i);
        if (!first)
            check(MPI_Send(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
    }
}

static void bw_loop(char *buf, int size, int first, int peer, int tag, long n)
{
    for (long i = 0; i < n; i++) {
        if (first) {
            stamp(buf, size, i);
            check(MPI_Send(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
        } else {
            recv_stamped(buf, size, peer, tag, i);
        }
    }
    if (first)
        check(MPI_Recv(NULL, 0, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
    else
        check(MPI_Send(NULL, 0, MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
}

static void msgrate_loop(char *buf, int size, int first, int peer, int tag, long n)
{
    for (long i = 1; i <= n; i++) {
        if (first) {
            check(MPI_Send(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
            if (i % BATCH == 0)
                check(MPI_Recv(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "MPI_Recv");
        } else {
            check(MPI_Recv(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                  "MPI_Recv");
            if (i % BATCH == 0)
                check(MPI_Send(buf, size, MPI_BYTE, peer, tag, MPI_COMM_WORLD), "MPI_Send");
        }
    }
}

static void (*pair_loop)(char *buf, int size, int first, int peer, int tag, long n);

/* pair_stream runs pair_loop on stream t's end of its pair. */
static void pair_stream(int t, long n)
{
    int first, peer, tag;
    pair_of(t, &first, &peer, &tag);
    char *buf = xmalloc((size_t)opt_size);
    pair_loop(buf, (int)opt_size, first, peer, tag, n);
    free(buf);
}

static void test_pairs(void)
{
    pair_loop = is("bw") ? bw_loop : is("msgrate") ? msgrate_loop : pingpong_loop;
    double s = timed(threaded ? (int)opt_pairs : 0, opt_iters, pair_stream);
    if (is("bw"))
        result("", "bandwidth", (double)opt_pairs * opt_iters * opt_size / s / 1e9, "GB/s");
    else if (is("msgrate"))
        result("", "rate", (double)opt_pairs * opt_iters / s / 1e6, "Mmsg/s");
    else
        result("", "latency", s / (2.0 * opt_iters) * 1e6, "us");
}

/* ---- shortlong ----------------------------------------------------------- */

static double *short_times;
static double long_secs;
static char *long_buf;
static char long_fill;

static void short_loop(long n)
{
    char buf[8] = {0};
    for (long i = 0; i < n; i++) {
        double start = MPI_Wtime();
        stamp(buf, 8, i);
        check(MPI_Send(buf, 8, MPI_BYTE, 2, TAG_SHORT, MPI_COMM_WORLD), "MPI_Send");
        recv_stamped(buf, 8, 2, TAG_SHORT, i);
        short_times[i] = MPI_Wtime() - start;
    }
}

static void echo_loop(long n)
{
    char buf[8];
    for (long i = 0; i < n; i++) {
        recv_stamped(buf, 8, 0, TAG_SHORT, i);
        check(MPI_Send(buf, 8, MPI_BYTE, 0, TAG_SHORT, MPI_COMM_WORLD), "MPI_Send");
    }
}

static void send_long(int to)
{
    double start = MPI_Wtime();
    check(MPI_Send(long_buf, (int)opt_size, MPI_BYTE, to, TAG_LONG, MPI_COMM_WORLD), "MPI_Send");
    long_secs = MPI_Wtime() - start;
}

static void recv_long(int from)
{
    MPI_Status st;
    int got = -1;
    check(MPI_Recv(long_buf, (int)opt_size, MPI_BYTE, from, TAG_LONG, MPI_COMM_WORLD, &st),
          "MPI_Recv");
    MPI_Get_count(&st, MPI_BYTE, &got);
    for (long j = 0; got == opt_size && j < opt_size; j++)
        if (long_buf[j] != long_fill)
            got = -1;
    if (got != opt_size)
        die("shortlong: the long message is not the one sent");
}

static void shortlong_fn(int t, long n)
{
    if (rank == 0 && t == 0)
        short_loop(n);
    else if (rank == 0)
        send_long(1);
    else if (rank == 2)
        echo_loop(n);
    else if (rank == 1 && threaded)
        recv_long(0);
    else if (rank == 1)
        send_long(3);
    else
        recv_long(1);
}

static void test_shortlong(void)
{
    long_buf = xmalloc((size_t)opt_size);
    short_times = xmalloc(sizeof(double) * (size_t)opt_iters);
    for (int round = 0; round < 2; round++) {
        long n = round == 0 ? (opt_iters / 10 ? opt_iters / 10 : 1) : opt_iters;
        long_fill = (char)(round + 1);
        if ((rank == 0 && threaded) || (rank == 1 && !threaded))
            memset(long_buf, long_fill, (size_t)opt_size);
        run_team(rank == 0 && threaded ? 2 : 0, n, shortlong_fn, NULL);
        if (!threaded && rank == 1)
            check(MPI_Send(&long_secs, 1, MPI_DOUBLE, 0, TAG_LONG_TIME, MPI_COMM_WORLD), "MPI_Send");
        if (!threaded && rank == 0)
            check(MPI_Recv(&long_secs, 1, MPI_DOUBLE, 1, TAG_LONG_TIME, MPI_COMM_WORLD,
                           MPI_STATUS_IGNORE),
                  "MPI_Recv");
    }
    double sum = 0, mx = 0;
    for (long i = 0; i < opt_iters; i++) {
        char extra[32];
        snprintf(extra, sizeof extra, " iter=%ld", i);
        result(extra, "short", short_times[i] * 1e6, "us");
        sum += short_times[i];
        if (short_times[i] > mx)
            mx = short_times[i];
    }
    result("", "short_mean", sum / (double)opt_iters * 1e6, "us");
    result("", "short_max", mx * 1e6, "us");
    result("", "long", long_secs * 1e6, "us");
    free(long_buf);
    free(short_times);
}

/* ---- overlap ------------------------------------------------------------- */

static void *helper_main(void *arg)
{
    (void)arg;
    check(MPI_Recv(NULL, 0, MPI_BYTE, rank, TAG_HELPER, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
          "MPI_Recv");
    return NULL;
}

/* overlap_loop runs n halo exchanges with the four grid neighbours nb, each
 * around work microseconds of computation. */
static void overlap_loop(const int nb[4], char *send[4], char *recv[4], long n, double work)
{
    int size = (int)opt_size;
    MPI_Request reqs[8];
    MPI_Status sts[8];
    for (long i = 0; i < n; i++) {
        for (int d = 0; d < 4; d++) {
            stamp(send[d], size, i);
            check(MPI_Irecv(recv[d], size, MPI_BYTE, nb[d], d ^ 1, MPI_COMM_WORLD, &reqs[d]),
                  "MPI_Irecv");
            check(MPI_Isend(send[d], size, MPI_BYTE, nb[d], d, MPI_COMM_WORLD, &reqs[4 + d]),
                  "MPI_Isend");
        }
        for (double end = MPI_Wtime() + work * 1e-6; MPI_Wtime() < end;)
            ;
        check(MPI_Waitall(8, reqs, sts), "MPI_Waitall");
        for (int d = 0; d < 4; d++)
            check_stamp(&sts[d], recv[d], size, i);
    }
}

static void test_overlap(void)
{
    int rows = 1;
    for (int d = 1; d * d <= nranks; d++)
        if (nranks % d == 0)
            rows = d;
    int cols = nranks / rows, x = rank % cols, y = rank / cols;
    int nb[4] = {y * cols + (x + cols - 1) % cols, y * cols + (x + 1) % cols,
                 (y + rows - 1) % rows * cols + x, (y + 1) % rows * cols + x};
    char *send[4], *recv[4];
    for (int d = 0; d < 4; d++)
        send[d] = xmalloc((size_t)opt_size), recv[d] = xmalloc((size_t)opt_size);
    pthread_t helper;
    if (threaded && pthread_create(&helper, NULL, helper_main, NULL) != 0)
        die("pthread_create failed");
    double work = (double)opt_work;
    overlap_loop(nb, send, recv, opt_iters / 10 ? opt_iters / 10 : 1, work);
    double secs[2];
    for (int k = 0; k < 2; k++) {
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        double start = MPI_Wtime();
        overlap_loop(nb, send, recv, opt_iters, k == 0 ? 0 : work);
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        secs[k] = (MPI_Wtime() - start) / (double)opt_iters * 1e6;
    }
    if (threaded) {
        check(MPI_Send(NULL, 0, MPI_BYTE, rank, TAG_HELPER, MPI_COMM_WORLD), "MPI_Send");
        pthread_join(helper, NULL);
    }
    double comm = secs[0], both = secs[1];
    double hidden = 100 * (comm + work - both) / (comm < work ? comm : work);
    result("", "time", both, "us");
    result("", "comm", comm, "us");
    result("", "overlap", hidden < 0 ? 0 : hidden > 100 ? 100 : hidden, "percent");
    for (int d = 0; d < 4; d++)
        free(send[d]), free(recv[d]);
}

/* ---- allreduce and hidden ------------------------------------------------ */

static MPI_Comm comms[MAX_STREAMS];

/* reduce_loop runs n Allreduce sums of count doubles over c, each rank giving
 * its rank+1, and checks both ends of every result. */
static void reduce_loop(MPI_Comm c, long n, int count)
{
    int r, size;
    MPI_Comm_rank(c, &r);
    MPI_Comm_size(c, &size);
    double *send = xmalloc(sizeof(double) * (size_t)count);
    double *recv = xmalloc(sizeof(double) * (size_t)count);
    for (int i = 0; i < count; i++)
        send[i] = r + 1;
    double want = size * (size + 1) / 2;
    for (long i = 0; i < n; i++) {
        recv[0] = recv[count - 1] = 0;
        check(MPI_Allreduce(send, recv, count, MPI_DOUBLE, MPI_SUM, c), "MPI_Allreduce");
        if (recv[0] != want || recv[count - 1] != want)
            die("Allreduce gave a wrong sum");
    }
    free(send);
    free(recv);
}

static void allreduce_fn(int t, long n) { reduce_loop(comms[t], n, (int)(opt_size / 8)); }

static void test_allreduce(void)
{
    int k = threaded ? (int)opt_comms : 1;
    if (threaded)
        for (int t = 0; t < k; t++)
            check(MPI_Comm_dup(MPI_COMM_WORLD, &comms[t]), "MPI_Comm_dup");
    else
        check(MPI_Comm_split(MPI_COMM_WORLD, (int)(rank % opt_comms), rank, &comms[0]),
              "MPI_Comm_split");
    double s = timed(threaded ? k : 0, opt_iters, allreduce_fn);
    result("", "time", s / (double)opt_iters * 1e6, "us");
    for (int t = 0; t < k; t++)
        check(MPI_Comm_free(&comms[t]), "MPI_Comm_free");
}

/* unit is one piece of the hidden test's computation, a dependent chain of
 * multiply-adds whose value stays near 1 (the Weft body's is the same). */
static double unit(double x)
{
    for (int i = 0; i < 4096; i++)
        x = x * 0.999999 + 1e-6;
    return x;
}

/* seed starts the computation from a value the compiler cannot fold away. */
static volatile double seed = 1;

static MPI_Comm reducers = MPI_COMM_NULL;
static atomic_int stop_flag;
static MPI_Request stop_req;
static double rates[2 * MAX_STREAMS], reduce_secs;
static int alone_phase;

/* stopped says whether a worker should stop: its time alone is over, the
 * reducer thread is done, or (processes) the reducer rank's message came. */
static int stopped(double end)
{
    if (alone_phase)
        return MPI_Wtime() >= end;
    if (threaded)
        return atomic_load(&stop_flag);
    int done = 0;
    check(MPI_Test(&stop_req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    return done;
}

static void hidden_fn(int t, long n)
{
    if (!alone_phase && (threaded ? t == opt_workers : reducers != MPI_COMM_NULL)) {
        double start = MPI_Wtime();
        reduce_loop(reducers, n, (int)(opt_size / 8));
        reduce_secs = MPI_Wtime() - start;
        if (threaded)
            atomic_store(&stop_flag, 1);
        else
            for (int w = 1; w <= opt_workers; w++)
                check(MPI_Send(NULL, 0, MPI_BYTE, rank + w, TAG_STOP, MPI_COMM_WORLD), "MPI_Send");
        return;
    }
    if (alone_phase && reducers != MPI_COMM_NULL && !threaded) {
        struct timespec d = {0, (long)(ALONE_SECS * 1e9)};
        nanosleep(&d, NULL); /* asleep, so that the workers have the processors */
        return;
    }
    double start = MPI_Wtime(), end = start + ALONE_SECS, x = seed;
    long units = 0;
    do {
        x = unit(x);
        units++;
    } while (!stopped(end));
    if (fabs(x - 1) > 0.5)
        die("hidden: the computation drifted");
    rates[(alone_phase ? 0 : opt_workers) + t] = (double)units / (MPI_Wtime() - start);
}

static void test_hidden(void)
{
    int w = (int)opt_workers;
    if (threaded)
        reducers = MPI_COMM_WORLD;
    else
        check(MPI_Comm_split(MPI_COMM_WORLD, rank % (w + 1) == 0 ? 0 : MPI_UNDEFINED, rank,
                             &reducers),
              "MPI_Comm_split");
    double sums[4] = {0}, total[4] = {0};
    for (int round = 0; round < 2; round++) {
        long n = round == 0 ? (opt_iters / 10 ? opt_iters / 10 : 1) : opt_iters;
        memset(rates, 0, sizeof rates);
        reduce_secs = 0;
        alone_phase = 1;
        run_team(threaded ? w : 0, n, hidden_fn, NULL);
        alone_phase = 0;
        atomic_store(&stop_flag, 0);
        if (!threaded && reducers == MPI_COMM_NULL)
            check(MPI_Irecv(NULL, 0, MPI_BYTE, rank - rank % (w + 1), TAG_STOP, MPI_COMM_WORLD,
                            &stop_req),
                  "MPI_Irecv");
        run_team(threaded ? w + 1 : 0, n, hidden_fn, NULL);
    }
    for (int t = 0; t < w; t++)
        sums[0] += rates[t], sums[1] += rates[w + t];
    if (threaded || reducers != MPI_COMM_NULL)
        sums[2] = reduce_secs, sums[3] = 1;
    check(MPI_Reduce(sums, total, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD), "MPI_Reduce");
    result("", "compute", 100 * total[1] / total[0], "percent");
    result("", "time", total[2] / total[3] / (double)opt_iters * 1e6, "us");
    if (!threaded && reducers != MPI_COMM_NULL)
        check(MPI_Comm_free(&reducers), "MPI_Comm_free");
}

/* ---- latency_mt (OSU osu_latency_mt) -------------------------------------- */

static void latmt_fn(int t, long n)
{
    (void)t;
    int size = (int)opt_size;
    char *buf = xmalloc((size_t)size);
    if (rank == 0) {
        for (long i = 0; i < n * opt_threads; i++) {
            stamp(buf, size, i);
            check(MPI_Send(buf, size, MPI_BYTE, 1, 0, MPI_COMM_WORLD), "MPI_Send");
            recv_stamped(buf, size, 1, 0, i);
        }
    } else {
        for (long i = 0; i < n; i++) {
            check(MPI_Recv(buf, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Recv");
            check(MPI_Send(buf, size, MPI_BYTE, 0, 0, MPI_COMM_WORLD), "MPI_Send");
        }
    }
    free(buf);
}

static void test_latency_mt(void)
{
    double s = timed(rank == 1 ? (int)opt_threads : 0, opt_iters, latmt_fn);
    result("", "latency", s / (2.0 * opt_iters * opt_threads) * 1e6, "us");
}

/* ---- main ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    int want = settle();
    if (threaded) {
        int provided = MPI_THREAD_SINGLE;
        check(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        twin_rank = rank;
        if (provided < MPI_THREAD_MULTIPLE)
            die("-mode T needs MPI_THREAD_MULTIPLE, which this MPI does not provide");
    } else {
        check(MPI_Init(&argc, &argv), "MPI_Init");
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        twin_rank = rank;
    }
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if ((want > 0 && nranks != want) || nranks < 2) {
        char msg[160];
        snprintf(msg, sizeof msg, "-test %s -mode %s needs %d ranks; the job has %d", opt_test,
                 opt_mode, want > 0 ? want : 2, nranks);
        die(msg);
    }
    if (is("shortlong"))
        test_shortlong();
    else if (is("overlap"))
        test_overlap();
    else if (is("allreduce"))
        test_allreduce();
    else if (is("hidden"))
        test_hidden();
    else if (is("latency_mt"))
        test_latency_mt();
    else
        test_pairs();
    fflush(stdout);
    MPI_Finalize();
    return 0;
}
