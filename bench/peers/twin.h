/*
 * twin.h: what every C twin of a weft bench suite shares: the name of the MPI
 * it was built with, fatal errors that end the whole job, and a command line
 * read as Go's flag package reads the Go side's (-name value, -name=value,
 * --name value), so that the runner hands both sides the same arguments.
 *
 * A twin sets twin_name and twin_usage before parsing, and twin_rank once MPI
 * is up; every function here is static, so each twin is one translation unit.
 */
#ifndef WEFT_TWIN_H
#define WEFT_TWIN_H

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* IMPL is the impl= field of the result lines: the MPI the twin was built with. */
#if defined(MPICH_VERSION)
#define IMPL "mpich"
#elif defined(OMPI_MAJOR_VERSION)
#define IMPL "openmpi"
#else
#define IMPL "c"
#endif

static const char *twin_name = "twin"; /* the suite, first word of every message */
static const char *twin_usage = "";    /* the flags, printed after a bad command line */
static int twin_rank;                  /* this rank in MPI_COMM_WORLD, for messages */

/* die reports msg and ends the whole job. */
static void die(const char *msg)
{
    fprintf(stderr, "%s[%d]: %s\n", twin_name, twin_rank, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* check dies when an MPI call did not succeed, with MPI's reason. */
static void check(int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING], err[MPI_MAX_ERROR_STRING + 64];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    snprintf(err, sizeof err, "%s failed: %s", what, msg);
    die(err);
}

/* usage_exit reports a bad command line and exits, before or after MPI_Init
 * (every rank sees the same arguments, so every rank exits). */
static void usage_exit(const char *why)
{
    fprintf(stderr, "%s: %s\nusage: %s %s\n", twin_name, why, twin_name, twin_usage);
    exit(2);
}

/* A twin_flag is one flag: a string (str), an integer of at least min (num),
 * or a real (real); given, if not NULL, is set when the flag appears. */
struct twin_flag {
    const char *name;
    const char **str;
    long *num;
    double *real;
    long min;
    int *given;
};

/* twin_value stores val into f or exits saying why it cannot. */
static void twin_value(const struct twin_flag *f, const char *val)
{
    char *end = NULL, why[256];
    if (f->str) {
        *f->str = val;
    } else if (f->num) {
        long x = strtol(val, &end, 10);
        if (end == val || *end != '\0' || x < f->min) {
            snprintf(why, sizeof why, "-%s %s: want an integer of at least %ld", f->name, val, f->min);
            usage_exit(why);
        }
        *f->num = x;
    } else {
        double x = strtod(val, &end);
        if (end == val || *end != '\0') {
            snprintf(why, sizeof why, "-%s %s: want a number", f->name, val);
            usage_exit(why);
        }
        *f->real = x;
    }
    if (f->given)
        *f->given = 1;
}

/* twin_parse reads argv against the n flags, as Go's flag package would. */
static void twin_parse(int argc, char **argv, const struct twin_flag *flags, size_t n)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val;
        char name[64], why[128];
        if (a[0] != '-' || a[1] == '\0')
            usage_exit("unexpected argument (flags only)");
        a += a[1] == '-' ? 2 : 1;
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (len >= sizeof name)
            usage_exit("flag name too long");
        memcpy(name, a, len);
        name[len] = '\0';
        if (strcmp(name, "h") == 0 || strcmp(name, "help") == 0)
            usage_exit("help");
        if (eq)
            val = eq + 1;
        else if (i + 1 < argc)
            val = argv[++i];
        else {
            snprintf(why, sizeof why, "flag needs a value: -%s", name);
            usage_exit(why);
        }
        size_t k = 0;
        while (k < n && strcmp(flags[k].name, name) != 0)
            k++;
        if (k == n) {
            snprintf(why, sizeof why, "flag provided but not defined: -%s", name);
            usage_exit(why);
        }
        twin_value(&flags[k], val);
    }
}

#endif
