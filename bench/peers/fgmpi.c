/*
 * fgmpi.c: the C twin of Weft's FG-MPI suite (bench/fgmpi): the same flags,
 * the same tests and the same result lines, one rank per process.
 *
 *   mpicc.mpich   -O2 -o fgmpi.mpich   bench/peers/fgmpi.c
 *   mpicc.openmpi -O2 -o fgmpi.openmpi bench/peers/fgmpi.c
 *
 * MPI C API only, C99. Flags (Go's flag syntax: -name value, -name=value,
 * --name value):
 *
 *   -bench collocated   2 processes of one host ping-pong -size bytes (default
 *                       8) -iters times (default 1000), each message sent from
 *                       and received into a random slot of pools of -pool
 *                       bytes (default 32 MiB); then rank 0 memcpy()s between
 *                       slots picked the same way. Prints the one-way message
 *                       time, the copy time and their difference (us).
 *   -bench cannon       Cannon's multiply of order -n (default 1024) on a
 *                       q x q grid of processes, -reps times (default 1);
 *                       -procs O (default 1) is a label, Weft's procs for the
 *                       same row. Prints the mean time of one multiply on the
 *                       slowest rank (ms) and its rate (MFLOPS).
 *
 * Every message and copy is stamped and checked; every entry of the product
 * is compared with its closed form. Rank 0 prints the result lines, e.g.
 *   bench=cannon impl=mpich n=1024 ranks=16 procs=2 metric=time value=210 unit=ms
 * Errors go to stderr and end the job with a non-zero status.
 */
#include <stdint.h>

#include "twin.h"

#define MAX_SIZE (64L << 20)
#define MAX_POOL (1L << 30)
#define MAX_N 8192L
#define TAG_A 1
#define TAG_B 2

static const char *opt_bench = "collocated";
static long opt_size = 8, opt_iters = 1000, opt_pool = 32L << 20;
static long opt_n = 1024, opt_procs = 1, opt_reps = 1;
static int given[6]; /* size, iters, pool, n, procs, reps */

static int me, nranks;

/* ---- flags (as bench/fgmpi/fgmpi.go) ------------------------------------ */

static void parse_args(int argc, char **argv)
{
    twin_name = "fgmpi";
    twin_usage = "[-bench collocated] [-size BYTES] [-iters N] [-pool BYTES]\n"
                 "       -bench cannon [-n ORDER] [-procs O] [-reps R]";
    const struct twin_flag flags[] = {
        {"bench", &opt_bench, NULL, NULL, 0, NULL},
        {"size", NULL, &opt_size, NULL, 1, &given[0]},
        {"iters", NULL, &opt_iters, NULL, 1, &given[1]},
        {"pool", NULL, &opt_pool, NULL, 1, &given[2]},
        {"n", NULL, &opt_n, NULL, 1, &given[3]},
        {"procs", NULL, &opt_procs, NULL, 1, &given[4]},
        {"reps", NULL, &opt_reps, NULL, 1, &given[5]},
    };
    twin_parse(argc, argv, flags, sizeof flags / sizeof flags[0]);
    int cannon = strcmp(opt_bench, "cannon") == 0;
    if (!cannon && strcmp(opt_bench, "collocated") != 0)
        usage_exit("-bench: want collocated or cannon");
    /* flags 0-2 belong to collocated, 3-5 to cannon */
    for (int k = 0; k < 6; k++)
        if (given[k] && (k >= 3) != cannon) {
            char why[128];
            snprintf(why, sizeof why, "-%s is a flag of -bench %s, not of %s", flags[k + 1].name,
                     cannon ? "collocated" : "cannon", opt_bench);
            usage_exit(why);
        }
    if (opt_size > MAX_SIZE)
        usage_exit("-size: want 1 to 67108864 bytes");
    if (opt_pool > MAX_POOL)
        usage_exit("-pool: want 1 to 1073741824 bytes");
    if (opt_n > MAX_N)
        usage_exit("-n: want a matrix order of 1 to 8192");
}

/* job_exit reports flags that do not fit the job, which every rank sees alike:
 * each exits, without the MPI_Abort that can cut the message short. */
static void job_exit(const char *why)
{
    char msg[256];
    snprintf(msg, sizeof msg, "%s (the job has %d)", why, nranks);
    usage_exit(msg);
}

/* filled allocates n bytes and writes every page now, not in a timed loop. */
static void *filled(size_t n)
{
    char *p = malloc(n);
    if (!p)
        die("out of memory");
    memset(p, 1, n);
    return p;
}

/* ---- collocated ---------------------------------------------------------- */

static char *src_pool, *dst_pool;
static uint64_t slots, rng;

/* pick returns a random slot of pool: a 64-bit LCG (Knuth's MMIX constants),
 * seeded with the rank + 1, as in bench/fgmpi. */
static char *pick(char *pool)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return pool + (size_t)((rng >> 33) % slots) * (size_t)opt_size;
}

static void stamp(char *b, long i)
{
    b[0] = b[opt_size / 2] = b[opt_size - 1] = (char)i;
}

static void check_stamp(const char *what, const char *b, long n, long i)
{
    char w = (char)i;
    if (n != opt_size || b[0] != w || b[opt_size / 2] != w || b[opt_size - 1] != w) {
        char msg[160];
        snprintf(msg, sizeof msg, "%s %ld: %ld bytes stamped %d %d %d, want %ld bytes stamped %d", what, i, n,
                 (unsigned char)b[0], (unsigned char)b[opt_size / 2], (unsigned char)b[opt_size - 1],
                 opt_size, (unsigned char)w);
        die(msg);
    }
}

static void pingpong(long n)
{
    int peer = 1 - me, size = (int)opt_size, got;
    MPI_Status st;
    for (long i = 0; i < n; i++) {
        if (me == 0) {
            char *s = pick(src_pool);
            stamp(s, i);
            check(MPI_Send(s, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD), "MPI_Send");
        }
        char *d = pick(dst_pool);
        check(MPI_Recv(d, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD, &st), "MPI_Recv");
        MPI_Get_count(&st, MPI_BYTE, &got);
        check_stamp("message", d, got, i);
        if (me == 1) {
            char *s = pick(src_pool);
            stamp(s, i);
            check(MPI_Send(s, size, MPI_BYTE, peer, 0, MPI_COMM_WORLD), "MPI_Send");
        }
    }
}

static void copies(long n)
{
    if (me != 0)
        return;
    for (long i = 0; i < n; i++) {
        char *s = pick(src_pool);
        stamp(s, i);
        char *d = pick(dst_pool);
        memcpy(d, s, (size_t)opt_size);
        check_stamp("copy", d, opt_size, i);
    }
}

/* timed runs loop(warm) untimed, then loop(n) between two barriers, and
 * returns the seconds this rank saw. */
static double timed(void (*loop)(long), long warm, long n)
{
    loop(warm);
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double start = MPI_Wtime();
    loop(n);
    double took = MPI_Wtime() - start;
    check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    return took;
}

static void collocated(void)
{
    MPI_Comm host;
    int local;
    check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, me, MPI_INFO_NULL, &host),
          "MPI_Comm_split_type");
    MPI_Comm_size(host, &local);
    MPI_Comm_free(&host);
    if (nranks != 2 || local != 2)
        job_exit("collocated needs 2 processes on one host");
    slots = (uint64_t)(opt_pool / opt_size > 2 ? opt_pool / opt_size : 2);
    src_pool = filled(slots * (size_t)opt_size);
    dst_pool = filled(slots * (size_t)opt_size);
    rng = (uint64_t)me + 1;
    long warm = opt_iters / 10 > 1 ? opt_iters / 10 : 1;
    double msg = timed(pingpong, warm, opt_iters);
    double cp = timed(copies, 2 * warm, 2 * opt_iters);
    if (me != 0)
        return;
    msg = msg / (2.0 * opt_iters) * 1e6;
    cp = cp / (2.0 * opt_iters) * 1e6;
    const char *metric[3] = {"message", "copy", "overhead"};
    double value[3] = {msg, cp, msg - cp};
    for (int k = 0; k < 3; k++)
        printf("bench=collocated impl=%s size=%ld metric=%s value=%.6g unit=us\n", IMPL, opt_size, metric[k],
               value[k]);
    fflush(stdout);
}

/* ---- cannon -------------------------------------------------------------- */

static long q, b, row, col;
static double *blk_a, *blk_b, *blk_c, *blk_t;

/* at is the rank at grid position (r, c), both modulo q. */
static int at(long r, long c) { return (int)(((r % q + q) % q) * q + (c % q + q) % q); }

/* A[i][k] = i+k, B[k][j] = k-2j; their product, exact in doubles, is
 * C[i][j] = S2 + (i-2j)S1 - 2nij (see bench/fgmpi/cannon.go). */
static double product(long i, long j)
{
    long n = opt_n, s1 = n * (n - 1) / 2, s2 = (n - 1) * n * (2 * n - 1) / 6;
    return (double)(s2 + (i - 2 * j) * s1 - 2 * n * i * j);
}

static void fill(void)
{
    for (long ii = 0; ii < b; ii++)
        for (long kk = 0; kk < b; kk++) {
            blk_a[ii * b + kk] = (double)(row * b + ii + col * b + kk);
            blk_b[ii * b + kk] = (double)(row * b + ii - 2 * (col * b + kk));
            blk_c[ii * b + kk] = 0;
        }
}

/* shift sends *blk to dest and puts the block from src in its place. */
static void shift(double **blk, int dest, int src, int tag)
{
    if (dest == me)
        return;
    MPI_Status st;
    int got;
    check(MPI_Sendrecv(*blk, (int)(b * b), MPI_DOUBLE, dest, tag, blk_t, (int)(b * b), MPI_DOUBLE, src, tag,
                       MPI_COMM_WORLD, &st),
          "MPI_Sendrecv");
    MPI_Get_count(&st, MPI_DOUBLE, &got);
    if (got != b * b)
        die("cannon: a block of the wrong length");
    double *t = *blk;
    *blk = blk_t;
    blk_t = t;
}

/* multiply_add is c += a*b on b x b blocks, the plain i-k-j loop. */
static void multiply_add(double *restrict c, const double *restrict a, const double *restrict bm)
{
    for (long i = 0; i < b; i++)
        for (long k = 0; k < b; k++) {
            double aik = a[i * b + k];
            const double *brow = bm + k * b;
            double *crow = c + i * b;
            for (long j = 0; j < b; j++)
                crow[j] += aik * brow[j];
        }
}

static void multiply(void)
{
    shift(&blk_a, at(row, col - row), at(row, col + row), TAG_A);
    shift(&blk_b, at(row - col, col), at(row + col, col), TAG_B);
    for (long step = 0; step < q; step++) {
        multiply_add(blk_c, blk_a, blk_b);
        if (step == q - 1)
            break;
        shift(&blk_a, at(row, col - 1), at(row, col + 1), TAG_A);
        shift(&blk_b, at(row - 1, col), at(row + 1, col), TAG_B);
    }
}

static void check_product(void)
{
    for (long ii = 0; ii < b; ii++)
        for (long jj = 0; jj < b; jj++) {
            long i = row * b + ii, j = col * b + jj;
            double got = blk_c[ii * b + jj], want = product(i, j);
            if (got != want) {
                char msg[160];
                snprintf(msg, sizeof msg, "cannon: C[%ld][%ld] is %g, want %g", i, j, got, want);
                die(msg);
            }
        }
}

static void cannon(void)
{
    for (q = 1; (q + 1) * (q + 1) <= nranks; q++)
        ;
    if (q * q != nranks)
        job_exit("cannon needs a square number of processes");
    if (opt_n % q != 0)
        job_exit("-n: cannon needs an order divisible by the side of its square grid of processes");
    if (nranks % opt_procs != 0)
        job_exit("-procs does not divide the job's processes");
    b = opt_n / q;
    row = me / q;
    col = me % q;
    size_t bytes = (size_t)(b * b) * sizeof(double);
    blk_a = filled(bytes);
    blk_b = filled(bytes);
    blk_c = filled(bytes);
    blk_t = filled(bytes);
    double total = 0;
    for (long r = 0; r < opt_reps; r++) {
        fill();
        /* the slowest rank's time between leaving two barriers (see
         * makespan in bench/fgmpi/cannon.go) */
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        double start = MPI_Wtime();
        multiply();
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        double took = MPI_Wtime() - start;
        check(MPI_Allreduce(MPI_IN_PLACE, &took, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
        check_product();
        total += took;
    }
    if (me != 0)
        return;
    double secs = total / (double)opt_reps, n = (double)opt_n;
    printf("bench=cannon impl=%s n=%ld ranks=%d procs=%ld metric=time value=%.6g unit=ms\n", IMPL, opt_n, nranks,
           opt_procs, secs * 1e3);
    printf("bench=cannon impl=%s n=%ld ranks=%d procs=%ld metric=rate value=%.6g unit=MFLOPS\n", IMPL, opt_n,
           nranks, opt_procs, 2 * n * n * n / secs / 1e6);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    check(MPI_Init(&argc, &argv), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    twin_rank = me;
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (strcmp(opt_bench, "cannon") == 0)
        cannon();
    else
        collocated();
    MPI_Finalize();
    return 0;
}
