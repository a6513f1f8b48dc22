/*
 * kernels.c: the C "peer twin" of Weft's kernels suite (bench/kernels): TMPI's
 * matrix multiplication and Gaussian elimination, Stricker et al.'s 2D-FFT and
 * SOR, with the same flags, the same numerics and the same result lines as the
 * Weft body.
 *
 *   mpicc.mpich   -O2 -o kernels.mpich   bench/peers/kernels.c -lpthread
 *   mpicc.openmpi -O2 -o kernels.openmpi bench/peers/kernels.c -lpthread
 *
 * MPI C API and C11, and no libm (the runner does not link it): sine and cosine
 * are computed here. Flags (Go's flag syntax: -name value, -name=value):
 *
 *   -kernel matmul|gauss|fft2d|sor
 *   -n N       matrix order, FFT side or grid side, 2 to 4096 (default 256)
 *   -iters N   sor: red-black sweeps per run (default 10)
 *   -reps N    timed runs, of which the fastest counts (default 2)
 *
 * Rank 0 prints the fastest timed run, for example
 *   bench=kernels impl=mpich kernel=gauss ranks=4 n=512 metric=mflops value=1234 unit=MFLOPS
 * Each run is checked as the Weft body checks it (see bench/kernels); a wrong
 * result, like any error, goes to stderr and ends the job (MPI_Abort).
 */
#include <stdint.h>

#include "twin.h"

#define MAX_N 4096
#define SOR_OMEGA 1.5
#define SOR_FLOPS 6
#define FFT_WAVES 3
#define PI 3.14159265358979323846

enum { SEED_A = 1, SEED_B, SEED_X, SEED_WAVES };
enum { TAG_MATMUL = 1 };
enum { TAG_UP = 1, TAG_DOWN };

static const char *opt_kernel = "";
static long opt_n = 256, opt_iters = 10, opt_reps = 2;
static int iters_given;

static int rank, nranks, n;

/* ---- shared numerics (bench/kernels/numerics.go) ------------------------- */

static void *xmalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size);
    if (!p)
        die("out of memory");
    return p;
}

/* uniform is the same number in [-1, 1) as the Go side's for (seed, i, j). */
static double uniform(int seed, int i, int j)
{
    uint64_t z = (uint64_t)seed << 48 ^ (uint64_t)i << 24 ^ (uint64_t)j;
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ z >> 30) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ z >> 27) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1p-52 - 1;
}

/* block_rows: rank r's first row and end when n rows go over p ranks. */
static void block_rows(int rows, int p, int r, int *lo, int *hi)
{
    int q = rows / p, extra = rows % p;
    *lo = r * q + (r < extra ? r : extra);
    *hi = *lo + q + (r < extra);
}

/* blocks fills every rank's element count and first element, width per row. */
static void blocks(int rows, int width, int *counts, int *displs)
{
    for (int r = 0; r < nranks; r++) {
        int lo, hi;
        block_rows(rows, nranks, r, &lo, &hi);
        counts[r] = (hi - lo) * width;
        displs[r] = lo * width;
    }
}

static double absd(double x) { return x < 0 ? -x : x; }

/* sin_cos of x: x = k pi/2 + r with |r| <= pi/4, Taylor series of r to r^21. */
static void sin_cos(double x, double *s, double *c)
{
    double kf = x * (2 / PI);
    long k = (long)(kf < 0 ? kf - 0.5 : kf + 0.5);
    double r = (x - (double)k * 1.57079632679489655800e+00) - (double)k * 6.12323399573676603587e-17;
    double r2 = r * r, sn = 1, cs = 1;
    for (int i = 10; i >= 1; i--) {
        sn = 1 - r2 / ((2.0 * i) * (2.0 * i + 1)) * sn;
        cs = 1 - r2 / ((2.0 * i - 1) * (2.0 * i)) * cs;
    }
    sn *= r;
    switch ((k % 4 + 4) % 4) {
    case 0: *s = sn, *c = cs; break;
    case 1: *s = cs, *c = -sn; break;
    case 2: *s = -sn, *c = -cs; break;
    default: *s = -cs, *c = sn;
    }
}

static double sine(double x)
{
    double s, c;
    sin_cos(x, &s, &c);
    return s;
}

/* too_far dies when got (complex when an imaginary part is not 0) is farther
 * than tol from want at element at, naming the kernel's quantity and the
 * element; die names the rank. */
static void too_far(const char *what, long at, double got, double got_im, double want, double want_im,
                    double tol)
{
    double dr = got - want, di = got_im - want_im;
    if (dr * dr + di * di <= tol * tol)
        return;
    char msg[320];
    if (got_im == 0 && want_im == 0)
        snprintf(msg, sizeof msg, "%s: element %ld is %.17g, want %.17g (off by %.3g, tolerance %.3g)", what,
                 at, got, want, dr, tol);
    else
        snprintf(msg, sizeof msg, "%s: element %ld is (%.17g%+.17gi), want (%.17g%+.17gi) (off by %.3g%+.3gi, "
                 "tolerance %.3g)", what, at, got, got_im, want, want_im, dr, di, tol);
    die(msg);
}

static double dot(const double *u, const double *v, int len)
{
    double s = 0;
    for (int i = 0; i < len; i++)
        s += u[i] * v[i];
    return s;
}

/* ---- matmul: C = A B, B's row blocks round the ring -------------------- */

static struct {
    int lo, hi;
    double *a, *c, *own, *cur, *next, *x, *y, *own_y;
    int *counts, *displs, *ycounts, *ydispls;
} mm;

static void matmul_setup(void)
{
    block_rows(n, nranks, rank, &mm.lo, &mm.hi);
    int rows = mm.hi - mm.lo, most = (n + nranks - 1) / nranks * n;
    mm.a = xmalloc((size_t)rows * n, sizeof(double));
    mm.c = xmalloc((size_t)rows * n, sizeof(double));
    mm.own = xmalloc((size_t)rows * n, sizeof(double));
    mm.cur = xmalloc(most, sizeof(double));
    mm.next = xmalloc(most, sizeof(double));
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < n; j++) {
            mm.a[i * n + j] = uniform(SEED_A, mm.lo + i, j);
            mm.own[i * n + j] = uniform(SEED_B, mm.lo + i, j);
        }
    mm.counts = xmalloc(nranks, sizeof(int));
    mm.displs = xmalloc(nranks, sizeof(int));
    mm.ycounts = xmalloc(nranks, sizeof(int));
    mm.ydispls = xmalloc(nranks, sizeof(int));
    blocks(n, n, mm.counts, mm.displs);
    blocks(n, 1, mm.ycounts, mm.ydispls);
    mm.x = xmalloc(n, sizeof(double));
    mm.y = xmalloc(n, sizeof(double));
    mm.own_y = xmalloc(rows, sizeof(double));
    for (int j = 0; j < n; j++)
        mm.x[j] = uniform(SEED_X, j, 0);
}

static void matmul_reset(void)
{
    memset(mm.c, 0, sizeof(double) * (mm.hi - mm.lo) * n);
    memcpy(mm.cur, mm.own, sizeof(double) * (mm.hi - mm.lo) * n);
}

/* multiply_add adds A[:, first:first+rows] b to C (this rank's rows). */
static void multiply_add(const double *b, int rows, int first)
{
    for (int i = 0; i < mm.hi - mm.lo; i++) {
        double *ci = mm.c + (size_t)i * n;
        for (int k = 0; k < rows; k++) {
            double aik = mm.a[(size_t)i * n + first + k];
            const double *bk = b + (size_t)k * n;
            for (int j = 0; j < n; j++)
                ci[j] += aik * bk[j];
        }
    }
}

static void matmul_run(void)
{
    int p = nranks, r = rank;
    for (int s = 0; s < p; s++) {
        int k = (r - s + p) % p, from = (k - 1 + p) % p;
        MPI_Request reqs[2];
        MPI_Status stats[2]; /* not MPI_STATUSES_IGNORE: a gcc false positive with MPICH's headers */
        int nreq = 0;
        if (s < p - 1) {
            check(MPI_Irecv(mm.next, mm.counts[from], MPI_DOUBLE, (r - 1 + p) % p, TAG_MATMUL, MPI_COMM_WORLD,
                            &reqs[0]), "MPI_Irecv");
            check(MPI_Isend(mm.cur, mm.counts[k], MPI_DOUBLE, (r + 1) % p, TAG_MATMUL, MPI_COMM_WORLD, &reqs[1]),
                  "MPI_Isend");
            nreq = 2;
        }
        multiply_add(mm.cur, mm.counts[k] / n, mm.displs[k] / n);
        check(MPI_Waitall(nreq, reqs, stats), "MPI_Waitall");
        double *t = mm.cur;
        mm.cur = mm.next;
        mm.next = t;
    }
}

/* matmul_check is Freivalds': C x against A (B x). */
static void matmul_check(void)
{
    int rows = mm.hi - mm.lo;
    for (int i = 0; i < rows; i++)
        mm.own_y[i] = dot(mm.own + (size_t)i * n, mm.x, n);
    check(MPI_Allgatherv(mm.own_y, rows, MPI_DOUBLE, mm.y, mm.ycounts, mm.ydispls, MPI_DOUBLE, MPI_COMM_WORLD),
          "MPI_Allgatherv");
    double tol = 1e-11 * n * n;
    for (int i = 0; i < rows; i++)
        too_far("matmul: C x", mm.lo + i, dot(mm.c + (size_t)i * n, mm.x, n), 0,
                dot(mm.a + (size_t)i * n, mm.y, n), 0, tol);
}

static double matmul_flops(void) { return 2.0 * n * n * n; }

/* ---- gauss: elimination with partial pivoting, rows round-robin -------- */

static struct {
    int local;
    double *rows, *init, *pivot, *u, *x;
    char *used;
} ge;

static double known(int i) { return uniform(SEED_X, i, 0); }

static void gauss_setup(void)
{
    int w = n + 1;
    ge.local = (n - rank + nranks - 1) / nranks;
    ge.rows = xmalloc((size_t)ge.local * w, sizeof(double));
    ge.init = xmalloc((size_t)ge.local * w, sizeof(double));
    ge.used = xmalloc(ge.local, 1);
    ge.pivot = xmalloc(w, sizeof(double));
    for (int l = 0; l < ge.local; l++) {
        double *row = ge.init + (size_t)l * w, b = 0;
        for (int j = 0; j < n; j++) {
            row[j] = uniform(SEED_A, l * nranks + rank, j);
            b += row[j] * known(j);
        }
        row[n] = b;
    }
    if (rank == 0) {
        ge.u = xmalloc((size_t)n * w, sizeof(double));
        ge.x = xmalloc(n, sizeof(double));
    }
}

static void gauss_reset(void)
{
    memcpy(ge.rows, ge.init, sizeof(double) * ge.local * (n + 1));
    memset(ge.used, 0, ge.local);
}

static void gauss_run(void)
{
    int w = n + 1;
    struct {
        double value;
        int index;
    } best;
    for (int k = 0; k < n; k++) {
        best.value = -1;
        best.index = 0;
        for (int l = 0; l < ge.local; l++) {
            double v = absd(ge.rows[(size_t)l * w + k]);
            if (!ge.used[l] && v > best.value) {
                best.value = v;
                best.index = l * nranks + rank;
            }
        }
        check(MPI_Allreduce(MPI_IN_PLACE, &best, 1, MPI_DOUBLE_INT, MPI_MAXLOC, MPI_COMM_WORLD), "MPI_Allreduce");
        if (best.value == 0) {
            char msg[96];
            snprintf(msg, sizeof msg, "gauss: the matrix is singular (column %d)", k);
            die(msg);
        }
        double *piv = ge.pivot + k;
        int owner = best.index % nranks, len = w - k;
        if (owner == rank) {
            int l = best.index / nranks;
            memcpy(piv, ge.rows + (size_t)l * w + k, sizeof(double) * len);
            ge.used[l] = 1;
        }
        check(MPI_Bcast(piv, len, MPI_DOUBLE, owner, MPI_COMM_WORLD), "MPI_Bcast");
        if (ge.u)
            memcpy(ge.u + (size_t)k * w + k, piv, sizeof(double) * len);
        for (int l = 0; l < ge.local; l++) {
            if (ge.used[l])
                continue;
            double *row = ge.rows + (size_t)l * w + k, f = row[0] / piv[0];
            for (int j = 1; j < len; j++)
                row[j] -= f * piv[j];
        }
    }
    if (!ge.u)
        return;
    for (int k = n - 1; k >= 0; k--) {
        const double *row = ge.u + (size_t)k * w;
        double s = row[n];
        for (int j = k + 1; j < n; j++)
            s -= row[j] * ge.x[j];
        ge.x[k] = s / row[k];
    }
}

static void gauss_check(void)
{
    if (!ge.x)
        return;
    for (int i = 0; i < n; i++)
        too_far("gauss: x", i, ge.x[i], 0, known(i), 0, 1e-8);
}

static double gauss_flops(void) { return 2.0 * n * n * n / 3; }

/* ---- fft2d: row FFTs, transpose by Alltoall, row FFTs, transpose ------- */

/* Complex numbers are (re, im) pairs of doubles, arithmetic written out. */
static struct {
    int m, lo;
    double *a, *send, *recv, *w; /* m rows of n; m x m blocks per rank; w[t] = exp(-2 pi i t/n) */
    struct {
        int u, v;
        double re, im;
    } waves[FFT_WAVES];
} ft;

static void fft2d_setup(void)
{
    ft.m = n / nranks;
    ft.lo = rank * ft.m;
    size_t len = (size_t)2 * ft.m * n;
    ft.a = xmalloc(len, sizeof(double));
    ft.send = xmalloc(len, sizeof(double));
    ft.recv = xmalloc(len, sizeof(double));
    ft.w = xmalloc((size_t)2 * n, sizeof(double));
    for (int t = 0; t < n; t++) {
        double s, c;
        sin_cos(2 * PI * t / n, &s, &c);
        ft.w[2 * t] = c;
        ft.w[2 * t + 1] = -s;
    }
    for (int i = 0; i < FFT_WAVES; i++) {
        ft.waves[i].u = (int)((uniform(SEED_WAVES, i, 0) + 1) / 2 * n);
        ft.waves[i].v = (int)((uniform(SEED_WAVES, i, 1) + 1) / 2 * n);
        ft.waves[i].re = uniform(SEED_WAVES, i, 2);
        ft.waves[i].im = uniform(SEED_WAVES, i, 3);
    }
}

/* fft2d_reset writes the sum of the plane waves amp * exp(2 pi i (u j + v k) / n). */
static void fft2d_reset(void)
{
    for (int i = 0; i < ft.m; i++)
        for (int k = 0; k < n; k++) {
            double re = 0, im = 0;
            for (int q = 0; q < FFT_WAVES; q++) {
                long t = ((long)ft.waves[q].u * (ft.lo + i) + (long)ft.waves[q].v * k) % n;
                double wr = ft.w[2 * t], wi = -ft.w[2 * t + 1];
                re += ft.waves[q].re * wr - ft.waves[q].im * wi;
                im += ft.waves[q].re * wi + ft.waves[q].im * wr;
            }
            ft.a[2 * ((size_t)i * n + k)] = re;
            ft.a[2 * ((size_t)i * n + k) + 1] = im;
        }
}

/* fft is the in-place radix-2 decimation-in-time FFT of the n points of x. */
static void fft(double *x)
{
    for (int i = 1, j = 0; i < n; i++) {
        int bit = n >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j ^= bit;
        if (i < j) {
            double re = x[2 * i], im = x[2 * i + 1];
            x[2 * i] = x[2 * j], x[2 * i + 1] = x[2 * j + 1];
            x[2 * j] = re, x[2 * j + 1] = im;
        }
    }
    for (int size = 2; size <= n; size <<= 1) {
        int half = size / 2, step = n / size;
        for (int start = 0; start < n; start += size) {
            double *lo = x + 2 * start, *hi = x + 2 * (start + half);
            for (int k = 0; k < half; k++) {
                double wr = ft.w[2 * k * step], wi = ft.w[2 * k * step + 1];
                double tr = wr * hi[2 * k] - wi * hi[2 * k + 1], ti = wr * hi[2 * k + 1] + wi * hi[2 * k];
                hi[2 * k] = lo[2 * k] - tr;
                hi[2 * k + 1] = lo[2 * k + 1] - ti;
                lo[2 * k] += tr;
                lo[2 * k + 1] += ti;
            }
        }
    }
}

static void transpose(void)
{
    int m = ft.m;
    for (int d = 0; d < nranks; d++)
        for (int i = 0; i < m; i++)
            memcpy(ft.send + 2 * ((size_t)(d * m + i) * m), ft.a + 2 * ((size_t)i * n + d * m),
                   sizeof(double) * 2 * m);
    check(MPI_Alltoall(ft.send, 2 * m * m, MPI_DOUBLE, ft.recv, 2 * m * m, MPI_DOUBLE, MPI_COMM_WORLD),
          "MPI_Alltoall");
    for (int s = 0; s < nranks; s++)
        for (int i = 0; i < m; i++) {
            const double *blk = ft.recv + 2 * ((size_t)(s * m + i) * m);
            for (int j = 0; j < m; j++) {
                ft.a[2 * ((size_t)j * n + s * m + i)] = blk[2 * j];
                ft.a[2 * ((size_t)j * n + s * m + i) + 1] = blk[2 * j + 1];
            }
        }
}

static void fft2d_run(void)
{
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < ft.m; i++)
            fft(ft.a + 2 * (size_t)i * n);
        transpose();
    }
}

/* fft2d_check: n^2 times each wave's amplitude at its frequency, zero elsewhere. */
static void fft2d_check(void)
{
    double nn = (double)n * n;
    for (int i = 0; i < ft.m; i++)
        for (int k = 0; k < n; k++) {
            long at = (long)(ft.lo + i) * n + k;
            double re = 0, im = 0;
            for (int q = 0; q < FFT_WAVES; q++)
                if (ft.waves[q].u == ft.lo + i && ft.waves[q].v == k) {
                    re += ft.waves[q].re * nn;
                    im += ft.waves[q].im * nn;
                }
            too_far("fft2d: X", at, ft.a[2 * ((size_t)i * n + k)], ft.a[2 * ((size_t)i * n + k) + 1], re, im,
                    1e-9 * nn);
        }
}

static double fft2d_flops(void)
{
    int lg = 0;
    while ((1 << lg) < n)
        lg++;
    return 10.0 * n * n * lg;
}

/* ---- sor: red-black SOR, rows split by blocks, halos by Sendrecv ------- */

static struct {
    int lo, rows, up, down; /* first interior row (from 1), rows, neighbours */
    double *u, mu;          /* rows+2 rows of n+2 */
} so;

static double sor_exact(int i, int j)
{
    double h = 1.0 / (n + 1), x = i * h, y = j * h;
    return x * x - y * y + x * y;
}

static double sor_mode(int i, int j)
{
    double h = 1.0 / (n + 1);
    return sine(PI * i * h) * sine(2 * PI * j * h);
}

static void sor_setup(void)
{
    int lo, hi;
    block_rows(n, nranks, rank, &lo, &hi);
    so.lo = lo + 1;
    so.rows = hi - lo;
    so.u = xmalloc((size_t)(so.rows + 2) * (n + 2), sizeof(double));
    so.up = rank == 0 ? MPI_PROC_NULL : rank - 1;
    so.down = rank == nranks - 1 ? MPI_PROC_NULL : rank + 1;
    double h = 1.0 / (n + 1), s, c1, c2;
    sin_cos(PI * h, &s, &c1);
    sin_cos(2 * PI * h, &s, &c2);
    so.mu = (c1 + c2) / 2;
}

static void sor_reset(void)
{
    int w = n + 2;
    for (int l = 0; l < so.rows + 2; l++) {
        int i = so.lo - 1 + l;
        for (int j = 0; j < w; j++) {
            so.u[(size_t)l * w + j] = sor_exact(i, j);
            if (i > 0 && i <= n && j > 0 && j <= n)
                so.u[(size_t)l * w + j] += sor_mode(i, j);
        }
    }
}

static void sor_exchange(void)
{
    int w = n + 2;
    double *first = so.u + w, *last = so.u + (size_t)so.rows * w;
    double *above = so.u, *below = so.u + (size_t)(so.rows + 1) * w;
    check(MPI_Sendrecv(first, w, MPI_DOUBLE, so.up, TAG_UP, below, w, MPI_DOUBLE, so.down, TAG_UP,
                       MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Sendrecv");
    check(MPI_Sendrecv(last, w, MPI_DOUBLE, so.down, TAG_DOWN, above, w, MPI_DOUBLE, so.up, TAG_DOWN,
                       MPI_COMM_WORLD, MPI_STATUS_IGNORE), "MPI_Sendrecv");
}

static void sor_run(void)
{
    int w = n + 2;
    double c1 = 1 - SOR_OMEGA, c2 = SOR_OMEGA / 4;
    for (long it = 0; it < opt_iters; it++)
        for (int colour = 0; colour < 2; colour++) {
            sor_exchange();
            for (int l = 1; l <= so.rows; l++) {
                const double *above = so.u + (size_t)(l - 1) * w, *below = so.u + (size_t)(l + 1) * w;
                double *mid = so.u + (size_t)l * w;
                for (int j = 1 + (so.lo + l + colour) % 2; j < w - 1; j += 2)
                    mid[j] = c1 * mid[j] + c2 * (above[j] + below[j] + mid[j - 1] + mid[j + 1]);
            }
        }
}

/* sor_check: e + a_k phi on red points, e + b_k phi on black (see sor.go). */
static void sor_check(void)
{
    double a = 1, b = 1;
    for (long it = 0; it < opt_iters; it++) {
        a = (1 - SOR_OMEGA) * a + SOR_OMEGA * so.mu * b;
        b = (1 - SOR_OMEGA) * b + SOR_OMEGA * so.mu * a;
    }
    int w = n + 2;
    for (int l = 1; l <= so.rows; l++) {
        int i = so.lo + l - 1;
        for (int j = 0; j < w; j++) {
            double want = sor_exact(i, j);
            if (j > 0 && j < w - 1)
                want += ((i + j) % 2 == 0 ? a : b) * sor_mode(i, j);
            too_far("sor: u", (long)i * w + j, so.u[(size_t)l * w + j], 0, want, 0, 1e-9);
        }
    }
}

static double sor_flops(void) { return (double)SOR_FLOPS * n * n * opt_iters; }

/* ---- the driver -------------------------------------------------------- */

static const char *rows_fit(void)
{
    return n < nranks ? "want at least one row per rank" : NULL;
}

static const char *fft2d_fit(void)
{
    if (n & (n - 1))
        return "fft2d's radix-2 FFT wants a power of two";
    if (n % nranks)
        return "fft2d's transpose moves equal blocks, so the ranks must divide it";
    return NULL;
}

static const struct kernel {
    const char *name;
    const char *(*fit)(void);
    void (*setup)(void), (*reset)(void), (*run)(void), (*check)(void);
    double (*flops)(void);
} kernels[] = {
    {"fft2d", fft2d_fit, fft2d_setup, fft2d_reset, fft2d_run, fft2d_check, fft2d_flops},
    {"gauss", rows_fit, gauss_setup, gauss_reset, gauss_run, gauss_check, gauss_flops},
    {"matmul", rows_fit, matmul_setup, matmul_reset, matmul_run, matmul_check, matmul_flops},
    {"sor", rows_fit, sor_setup, sor_reset, sor_run, sor_check, sor_flops},
};

/* settle checks the flags as the Weft body does and returns the kernel. */
static const struct kernel *settle(void)
{
    const struct kernel *k = NULL;
    char why[160];
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (strcmp(opt_kernel, kernels[i].name) == 0)
            k = &kernels[i];
    if (!k) {
        snprintf(why, sizeof why, "-kernel \"%s\" is not one of [fft2d gauss matmul sor]", opt_kernel);
        usage_exit(why);
    }
    if (opt_n > MAX_N) {
        snprintf(why, sizeof why, "-n %ld: want 2 to %d", opt_n, MAX_N);
        usage_exit(why);
    }
    if (iters_given && strcmp(k->name, "sor") != 0) {
        snprintf(why, sizeof why, "-iters: only sor iterates, not %s", k->name);
        usage_exit(why);
    }
    n = (int)opt_n;
    const char *unfit = k->fit();
    if (unfit) {
        snprintf(why, sizeof why, "%s: -n %d: %s (%d ranks)", k->name, n, unfit, nranks);
        usage_exit(why);
    }
    return k;
}

static void result(const char *metric, double value, const char *unit)
{
    printf("bench=kernels impl=%s kernel=%s ranks=%d n=%d", IMPL, opt_kernel, nranks, n);
    if (strcmp(opt_kernel, "sor") == 0)
        printf(" iters=%ld", opt_iters);
    printf(" metric=%s value=%.6g unit=%s\n", metric, value, unit);
}

int main(int argc, char **argv)
{
    twin_name = "kernels";
    twin_usage = "-kernel matmul|gauss|fft2d|sor [-n N] [-iters N] [-reps N]";
    const struct twin_flag flags[] = {
        {"kernel", &opt_kernel, NULL, NULL, 0, NULL},
        {"n", NULL, &opt_n, NULL, 2, NULL},
        {"iters", NULL, &opt_iters, NULL, 1, &iters_given},
        {"reps", NULL, &opt_reps, NULL, 1, NULL},
    };
    twin_parse(argc, argv, flags, sizeof flags / sizeof flags[0]);
    check(MPI_Init(&argc, &argv), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    twin_rank = rank;
    const struct kernel *k = settle();

    k->setup();
    double best = 0;
    for (long rep = 0; rep < opt_reps; rep++) {
        k->reset();
        check(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
        double start = MPI_Wtime();
        k->run();
        double took = MPI_Wtime() - start;
        check(MPI_Allreduce(MPI_IN_PLACE, &took, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD), "MPI_Allreduce");
        k->check();
        if (rep == 0 || took < best)
            best = took;
    }
    if (rank == 0) {
        result("time", best * 1e3, "ms");
        result("mflops", k->flops() / best / 1e6, "MFLOPS");
        if (strcmp(opt_kernel, "sor") == 0)
            result("iter", best / opt_iters * 1e6, "us");
    }
    MPI_Finalize();
    return 0;
}
