/* snapshot.c - a task's RocksDB checkpoint and its manifest: make, parse, write, verify,
 * install and sweep (snapshot.h). */
#define _GNU_SOURCE /* nftw */
#include "replica/snapshot.h"

#include <assert.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "base/ffi.h"
#include "base/log.h"

#define READ_BUF (1 << 20)
#define MAX_NAME 255
#define MAX_STORES 4096 /* store lines of one manifest; a task has a handful */
#define MAX_TOKENS (10 + BK_STORE_MAX_INPUTS + 1)
#define MAX_MANIFEST_BYTES (256u << 20) /* 100,000 file lines are ~10 MB */

/* -- Names and small helpers ----------------------------------------------------------- */

int bk_snapshot_name_ok(const char *name)
{
    size_t n = strlen(name);
    if (n == 0 || n > MAX_NAME || strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            return 0;
        }
    }
    return 1;
}

/* A name from outside, fit to quote in an error: at most 64 bytes, controls as '?'. */
static const char *shown(const char *s, char *buf, size_t size)
{
    size_t i = 0;
    for (; s[i] && i + 4 < size && i < 64; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[i] = c < 0x20 || c >= 0x7f ? '?' : (char)c;
    }
    if (s[i]) {
        buf[i++] = '.';
        buf[i++] = '.';
        buf[i++] = '.';
    }
    buf[i] = '\0';
    return buf;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* fsync of a directory, so that renames and new entries in it are durable. */
static void sync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

/* The directory part of path ("." for none). */
static void parent_of(const char *path, char *buf, size_t size)
{
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(buf, size, ".");
    } else if (slash == path) {
        snprintf(buf, size, "/");
    } else {
        snprintf(buf, size, "%.*s", (int)(slash - path), path);
    }
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path) != 0 ? -1 : 0;
}

/* Removes a tree without following symbolic links. */
static int rm_tree(const char *dir)
{
    return nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int bk_snapshot_remove(const char *dir)
{
    return rm_tree(dir);
}

/* Reads a whole (small) file: *buf malloc'd and NUL-terminated. */
static int read_all(const char *path, char **buf, size_t *len, char *errstr, size_t errstr_size)
{
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat sb;
    size_t got = 0;

    *buf = NULL;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        snprintf(errstr, errstr_size, "cannot read %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > MAX_MANIFEST_BYTES) {
        snprintf(errstr, errstr_size, "%s: not a regular file of at most %u bytes", path,
                 MAX_MANIFEST_BYTES);
        goto fail;
    }
    *buf = malloc((size_t)sb.st_size + 1);
    while (got < (size_t)sb.st_size) {
        ssize_t r = read(fd, *buf + got, (size_t)sb.st_size - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            snprintf(errstr, errstr_size, "cannot read %s: %s", path,
                     r < 0 ? strerror(errno) : "shorter than it was");
            goto fail;
        }
        got += (size_t)r;
    }
    (*buf)[got] = '\0';
    *len = got;
    close(fd);
    return 0;

fail:
    if (fd >= 0) {
        close(fd);
    }
    free(*buf);
    *buf = NULL;
    return -1;
}

/* -- Checksums ------------------------------------------------------------------------- */

/* XXH3-64 and size of what fd reads from its current position to its end. */
static int hash_fd(int fd, uint64_t *out, uint64_t *size, char *errstr, size_t errstr_size)
{
    XXH3_state_t *xs = XXH3_createState();
    char *buf = malloc(READ_BUF);
    uint64_t total = 0;
    int rc = -1;

    XXH3_64bits_reset(xs);
    for (;;) {
        ssize_t r = read(fd, buf, READ_BUF);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            snprintf(errstr, errstr_size, "read error: %s", strerror(errno));
            goto out;
        }
        if (r == 0) {
            break;
        }
        XXH3_64bits_update(xs, buf, (size_t)r);
        total += (uint64_t)r;
    }
    *out = XXH3_64bits_digest(xs);
    *size = total;
    rc = 0;
out:
    free(buf);
    XXH3_freeState(xs);
    return rc;
}

/* Opens a regular file for reading, refusing symbolic links. */
static int open_regular(const char *path, const char *name, char *errstr, size_t errstr_size)
{
    struct stat sb;
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        snprintf(errstr, errstr_size, "%s: %s", name,
                 errno == ENOENT  ? "missing"
                 : errno == ELOOP ? "a symbolic link"
                                  : strerror(errno));
        return -1;
    }
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        snprintf(errstr, errstr_size, "%s: not a regular file", name);
        close(fd);
        return -1;
    }
    return fd;
}

int bk_snapshot_file_xxh3(const char *path, uint64_t *out, uint64_t *size, char *errstr,
                          size_t errstr_size)
{
    char err[512];
    int fd = open_regular(path, path, errstr, errstr_size), rc;
    if (fd < 0) {
        return -1;
    }
    rc = hash_fd(fd, out, size, err, sizeof(err));
    if (rc != 0) {
        snprintf(errstr, errstr_size, "%s: %s", path, err);
    }
    close(fd);
    return rc;
}

/* -- Manifest: parse ------------------------------------------------------------------- */

void bk_manifest_free(bk_manifest_t *m)
{
    free(m->task);
    free(m->id);
    for (int i = 0; i < m->nstores; i++) {
        free(m->stores[i].name);
        free(m->stores[i].changelog);
    }
    free(m->stores);
    for (int i = 0; i < m->nfiles; i++) {
        free(m->files[i].name);
    }
    free(m->files);
    memset(m, 0, sizeof(*m));
}

static int line_err(char *errstr, size_t errstr_size, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(errstr, errstr_size, "manifest line %d: %s", line, msg);
    return -1;
}

/* A decimal integer in [min, INT64_MAX], no sign but '-', no spaces. */
static int parse_i64(const char *s, int64_t min, int64_t *out)
{
    const char *d = s[0] == '-' ? s + 1 : s;
    char *end;
    long long v;
    if (*d < '0' || *d > '9') {
        return -1;
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || *end || v < min) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    unsigned long long v;
    if (*s < '0' || *s > '9') {
        return -1;
    }
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_hex64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (strlen(s) != 16) {
        return -1;
    }
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) {
            return -1;
        }
        v = v << 4 | (uint64_t)d;
    }
    *out = v;
    return 0;
}

/* Why a manifest's name is refused, for its error. */
static const char *name_problem(const char *name)
{
    if (strchr(name, '/') || strcmp(name, "..") == 0) {
        return "leaves the snapshot directory";
    }
    return "is not one path component of [A-Za-z0-9._-], at most 255 bytes, not '.'";
}

typedef struct {
    const char *name;
    int line;
} name_line_t;

static int cmp_name_line(const void *a, const void *b)
{
    const name_line_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->line - y->line;
}

/* One line, split at single spaces into tok[] (the line is modified); refuses empty tokens
 * (doubled, leading or trailing spaces). The count, or -1. */
static int split(char *line, char **tok, int max)
{
    int n = 0;
    char *p = line;
    for (;;) {
        char *sp = strchr(p, ' ');
        if (sp) {
            *sp = '\0';
        }
        if (*p == '\0' || n == max) {
            return -1;
        }
        tok[n++] = p;
        if (!sp) {
            return n;
        }
        p = sp + 1;
    }
}

/* The parser proper: fills m and lines[] (the line of each file) as it goes; the caller
 * frees both whatever happens. */
static int parse(const char *text, size_t len, bk_manifest_t *m, int **file_lines, char *errstr,
                 size_t errstr_size)
{
    char *line = NULL, *tok[MAX_TOKENS], nb[80];
    size_t pos = 0;
    int lineno = 0, ended = 0, have_created = 0, cap_files = 0, cap_stores = 0, rc = -1;

    while (pos < len) {
        const char *start = text + pos, *nl = memchr(start, '\n', len - pos);
        size_t llen = nl ? (size_t)(nl - start) : len - pos;
        int n;

        lineno++;
        pos += llen + (nl ? 1 : 0);
        if (ended) {
            line_err(errstr, errstr_size, lineno, "text after 'end': refused");
            goto out;
        }
        if (memchr(start, '\0', llen) || memchr(start, '\r', llen)) {
            line_err(errstr, errstr_size, lineno, "a NUL or CR byte: refused");
            goto out;
        }
        free(line);
        line = malloc(llen + 1);
        memcpy(line, start, llen);
        line[llen] = '\0';
        if ((n = split(line, tok, MAX_TOKENS)) < 0) {
            line_err(errstr, errstr_size, lineno,
                     llen ? "stray spaces or too many fields" : "an empty line");
            goto out;
        }
        if (lineno == 1) {
            if (n != 2 || strcmp(tok[0], "beck-snapshot") != 0) {
                line_err(errstr, errstr_size, lineno,
                         "not a beck snapshot manifest (expected 'beck-snapshot 1')");
                goto out;
            }
            if (strcmp(tok[1], "1") != 0) {
                line_err(errstr, errstr_size, lineno, "manifest version '%s' is not supported",
                         shown(tok[1], nb, sizeof(nb)));
                goto out;
            }
            continue;
        }
        if (strcmp(tok[0], "task") == 0 || strcmp(tok[0], "id") == 0) {
            char **slot = tok[0][0] == 't' ? &m->task : &m->id;
            if (n != 2) {
                line_err(errstr, errstr_size, lineno, "'%s' takes one value", tok[0]);
                goto out;
            }
            if (*slot) {
                line_err(errstr, errstr_size, lineno, "a second '%s' line", tok[0]);
                goto out;
            }
            if (!bk_snapshot_name_ok(tok[1])) {
                line_err(errstr, errstr_size, lineno, "%s '%s' %s: refused", tok[0],
                         shown(tok[1], nb, sizeof(nb)), name_problem(tok[1]));
                goto out;
            }
            *slot = strdup(tok[1]);
        } else if (strcmp(tok[0], "created_ms") == 0) {
            if (n != 2 || parse_i64(tok[1], 0, &m->created_ms) != 0) {
                line_err(errstr, errstr_size, lineno, "created_ms takes one integer >= 0");
                goto out;
            }
            if (have_created++) {
                line_err(errstr, errstr_size, lineno, "a second 'created_ms' line");
                goto out;
            }
        } else if (strcmp(tok[0], "store") == 0) {
            /* store NAME changelog TOPIC PARTITION next N inputs K O... */
            bk_snapshot_store_t *s;
            int64_t part, k;
            if (n < 9 || strcmp(tok[2], "changelog") != 0 || strcmp(tok[5], "next") != 0 ||
                strcmp(tok[7], "inputs") != 0) {
                line_err(errstr, errstr_size, lineno,
                         "expected 'store NAME changelog TOPIC PARTITION next N inputs K "
                         "OFFSET...'");
                goto out;
            }
            if (parse_i64(tok[8], 0, &k) != 0 || k > BK_STORE_MAX_INPUTS) {
                line_err(errstr, errstr_size, lineno,
                         "input count '%s' is not an integer in 0..%d: refused",
                         shown(tok[8], nb, sizeof(nb)), BK_STORE_MAX_INPUTS);
                goto out;
            }
            if (n != 9 + k) {
                line_err(errstr, errstr_size, lineno, "%d input offsets where %d are announced",
                         n - 9, (int)k);
                goto out;
            }
            for (int i = 1; i <= 3; i += 2) {
                if (!bk_snapshot_name_ok(tok[i])) {
                    line_err(errstr, errstr_size, lineno, "%s name '%s' %s: refused",
                             i == 1 ? "store" : "changelog", shown(tok[i], nb, sizeof(nb)),
                             name_problem(tok[i]));
                    goto out;
                }
            }
            for (int i = 0; i < m->nstores; i++) {
                if (strcmp(m->stores[i].name, tok[1]) == 0) {
                    line_err(errstr, errstr_size, lineno, "store '%s' listed twice", tok[1]);
                    goto out;
                }
            }
            if (m->nstores == MAX_STORES) {
                line_err(errstr, errstr_size, lineno, "more than %d stores", MAX_STORES);
                goto out;
            }
            if (m->nstores == cap_stores) {
                cap_stores = cap_stores ? cap_stores * 2 : 4;
                m->stores = realloc(m->stores, (size_t)cap_stores * sizeof(*m->stores));
            }
            s = &m->stores[m->nstores];
            memset(s, 0, sizeof(*s));
            if (parse_i64(tok[4], 0, &part) != 0 || part > INT32_MAX ||
                parse_i64(tok[6], -1, &s->next) != 0) {
                line_err(errstr, errstr_size, lineno,
                         "partition must be an integer >= 0, next one >= -1");
                goto out;
            }
            for (int i = 0; i < k; i++) {
                if (parse_i64(tok[9 + i], -1, &s->inputs[i]) != 0) {
                    line_err(errstr, errstr_size, lineno,
                             "input offset '%s' is not an integer >= -1",
                             shown(tok[9 + i], nb, sizeof(nb)));
                    goto out;
                }
            }
            s->name = strdup(tok[1]);
            s->changelog = strdup(tok[3]);
            s->partition = (int32_t)part;
            s->ninputs = (int)k;
            m->nstores++;
        } else if (strcmp(tok[0], "file") == 0) {
            /* file SIZE XXH3 NAME */
            bk_snapshot_file_t *f;
            uint64_t size, h;
            if (n != 4) {
                line_err(errstr, errstr_size, lineno, "expected 'file SIZE XXH3 NAME'");
                goto out;
            }
            if (parse_u64(tok[1], &size) != 0) {
                line_err(errstr, errstr_size, lineno, "file size '%s' is not an integer >= 0",
                         shown(tok[1], nb, sizeof(nb)));
                goto out;
            }
            if (parse_hex64(tok[2], &h) != 0) {
                line_err(errstr, errstr_size, lineno, "checksum '%s' is not 16 hex digits: refused",
                         shown(tok[2], nb, sizeof(nb)));
                goto out;
            }
            if (!bk_snapshot_name_ok(tok[3])) {
                line_err(errstr, errstr_size, lineno, "file name '%s' %s: refused",
                         shown(tok[3], nb, sizeof(nb)), name_problem(tok[3]));
                goto out;
            }
            if (strcmp(tok[3], BK_SNAPSHOT_MANIFEST) == 0) {
                line_err(errstr, errstr_size, lineno, "the manifest lists itself: refused");
                goto out;
            }
            if (m->nfiles == BK_SNAPSHOT_MAX_FILES) {
                line_err(errstr, errstr_size, lineno, "more than %d files: refused",
                         BK_SNAPSHOT_MAX_FILES);
                goto out;
            }
            if (m->total_bytes + size < m->total_bytes) {
                line_err(errstr, errstr_size, lineno, "the files' sizes overflow: refused");
                goto out;
            }
            if (m->nfiles == cap_files) {
                cap_files = cap_files ? cap_files * 2 : 16;
                m->files = realloc(m->files, (size_t)cap_files * sizeof(*m->files));
                *file_lines = realloc(*file_lines, (size_t)cap_files * sizeof(int));
            }
            f = &m->files[m->nfiles];
            f->name = strdup(tok[3]);
            f->size = size;
            f->xxh3 = h;
            (*file_lines)[m->nfiles++] = lineno;
            m->total_bytes += size;
        } else if (strcmp(tok[0], "end") == 0) {
            if (n != 1) {
                line_err(errstr, errstr_size, lineno, "'end' takes no value");
                goto out;
            }
            ended = 1;
        } else {
            line_err(errstr, errstr_size, lineno, "unknown line kind '%s': refused",
                     shown(tok[0], nb, sizeof(nb)));
            goto out;
        }
    }
    if (lineno == 0) {
        snprintf(errstr, errstr_size, "manifest line 1: empty: refused");
        goto out;
    }
    if (!ended) {
        line_err(errstr, errstr_size, lineno + 1, "no 'end': the manifest is cut short: refused");
        goto out;
    }
    if (!m->task || !m->id || !have_created) {
        line_err(errstr, errstr_size, lineno, "no '%s' line before 'end'",
                 !m->task ? "task"
                 : !m->id ? "id"
                          : "created_ms");
        goto out;
    }
    rc = 0;
out:
    free(line);
    return rc;
}

int bk_manifest_parse(const char *text, size_t len, bk_manifest_t *m, char *errstr,
                      size_t errstr_size)
{
    int *file_lines = NULL, rc;

    memset(m, 0, sizeof(*m));
    rc = parse(text, len, m, &file_lines, errstr, errstr_size);
    if (rc == 0 && m->nfiles > 1) {
        /* duplicate names: sorted, they sit side by side */
        name_line_t *byname = malloc((size_t)m->nfiles * sizeof(*byname));
        for (int i = 0; i < m->nfiles; i++) {
            byname[i].name = m->files[i].name;
            byname[i].line = file_lines[i];
        }
        qsort(byname, (size_t)m->nfiles, sizeof(*byname), cmp_name_line);
        for (int i = 1; i < m->nfiles && rc == 0; i++) {
            if (strcmp(byname[i - 1].name, byname[i].name) == 0) {
                rc = line_err(errstr, errstr_size, byname[i].line,
                              "file '%s' listed twice (also on line %d): refused", byname[i].name,
                              byname[i - 1].line);
            }
        }
        free(byname);
    }
    free(file_lines);
    if (rc != 0) {
        bk_manifest_free(m);
    }
    return rc;
}

/* -- Manifest: write ------------------------------------------------------------------- */

/* Checks that m would parse back to itself. */
static int manifest_ok(const bk_manifest_t *m, char *errstr, size_t errstr_size)
{
    if (!m->task || !bk_snapshot_name_ok(m->task) || !m->id || !bk_snapshot_name_ok(m->id) ||
        m->created_ms < 0) {
        snprintf(errstr, errstr_size, "manifest: bad task, id or created_ms");
        return -1;
    }
    for (int i = 0; i < m->nstores; i++) {
        const bk_snapshot_store_t *s = &m->stores[i];
        if (!bk_snapshot_name_ok(s->name) || !bk_snapshot_name_ok(s->changelog) ||
            s->partition < 0 || s->next < -1 || s->ninputs < 0 ||
            s->ninputs > BK_STORE_MAX_INPUTS) {
            snprintf(errstr, errstr_size, "manifest: store '%s' cannot be written", s->name);
            return -1;
        }
    }
    if (m->nfiles > BK_SNAPSHOT_MAX_FILES) {
        snprintf(errstr, errstr_size, "manifest: more than %d files", BK_SNAPSHOT_MAX_FILES);
        return -1;
    }
    for (int i = 0; i < m->nfiles; i++) {
        if (!bk_snapshot_name_ok(m->files[i].name) ||
            strcmp(m->files[i].name, BK_SNAPSHOT_MANIFEST) == 0) {
            snprintf(errstr, errstr_size, "manifest: file name '%s' cannot be listed",
                     m->files[i].name);
            return -1;
        }
    }
    return 0;
}

int bk_manifest_write(const bk_manifest_t *m, const char *path, char *errstr, size_t errstr_size)
{
    char tmp[4096], dir[4096], *buf = NULL;
    size_t len = 0, off = 0;
    FILE *f;
    int fd = -1, rc = -1;

    if (manifest_ok(m, errstr, errstr_size) != 0) {
        return -1;
    }
    f = open_memstream(&buf, &len);
    fprintf(f, "beck-snapshot 1\ntask %s\nid %s\ncreated_ms %lld\n", m->task, m->id,
            (long long)m->created_ms);
    for (int i = 0; i < m->nstores; i++) {
        const bk_snapshot_store_t *s = &m->stores[i];
        fprintf(f, "store %s changelog %s %d next %lld inputs %d", s->name, s->changelog,
                (int)s->partition, (long long)s->next, s->ninputs);
        for (int j = 0; j < s->ninputs; j++) {
            fprintf(f, " %lld", (long long)s->inputs[j]);
        }
        fputc('\n', f);
    }
    for (int i = 0; i < m->nfiles; i++) {
        fprintf(f, "file %llu %016llx %s\n", (unsigned long long)m->files[i].size,
                (unsigned long long)m->files[i].xxh3, m->files[i].name);
    }
    fputs("end\n", f);
    fclose(f);

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(errstr, errstr_size, "cannot write %s: %s", tmp, strerror(errno));
        goto out;
    }
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w < 0) {
            snprintf(errstr, errstr_size, "cannot write %s: %s", tmp, strerror(errno));
            goto out;
        }
        off += (size_t)w;
    }
    if (fsync(fd) != 0) {
        snprintf(errstr, errstr_size, "cannot sync %s: %s", tmp, strerror(errno));
        goto out;
    }
    close(fd);
    fd = -1;
    if (rename(tmp, path) != 0) {
        snprintf(errstr, errstr_size, "cannot rename %s: %s", tmp, strerror(errno));
        goto out;
    }
    parent_of(path, dir, sizeof(dir));
    sync_dir(dir);
    rc = 0;
out:
    if (fd >= 0) {
        close(fd);
    }
    if (rc != 0) {
        unlink(tmp);
    }
    free(buf);
    return rc;
}

/* -- Make ------------------------------------------------------------------------------ */

static int cmp_file(const void *a, const void *b)
{
    return strcmp(((const bk_snapshot_file_t *)a)->name, ((const bk_snapshot_file_t *)b)->name);
}

/* The checkpoint's files, sorted by name, with sizes and checksums. */
static int list_files(const char *dir, bk_manifest_t *m, char *errstr, size_t errstr_size)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int cap = 0, rc = 0;

    if (!d) {
        snprintf(errstr, errstr_size, "cannot list %s: %s", dir, strerror(errno));
        return -1;
    }
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char path[4096];
        bk_snapshot_file_t *f;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if (!bk_snapshot_name_ok(e->d_name) || strcmp(e->d_name, BK_SNAPSHOT_MANIFEST) == 0) {
            snprintf(errstr, errstr_size, "%s: RocksDB's checkpoint has a file named '%s'", dir,
                     e->d_name);
            rc = -1;
            break;
        }
        if (m->nfiles == BK_SNAPSHOT_MAX_FILES) {
            snprintf(errstr, errstr_size, "%s: more than %d files", dir, BK_SNAPSHOT_MAX_FILES);
            rc = -1;
            break;
        }
        if (m->nfiles == cap) {
            cap = cap ? cap * 2 : 16;
            m->files = realloc(m->files, (size_t)cap * sizeof(*m->files));
        }
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        f = &m->files[m->nfiles];
        rc = bk_snapshot_file_xxh3(path, &f->xxh3, &f->size, errstr, errstr_size);
        if (rc == 0) {
            f->name = strdup(e->d_name);
            m->total_bytes += f->size;
            m->nfiles++;
        }
    }
    closedir(d);
    if (m->nfiles > 1) {
        qsort(m->files, (size_t)m->nfiles, sizeof(*m->files), cmp_file);
    }
    return rc;
}

static int exists(const char *path)
{
    struct stat sb;
    return lstat(path, &sb) == 0;
}

int bk_snapshot_make(bk_db_t *db, const char *task, const char *root, bk_manifest_t *m, char *dir,
                     size_t dir_size, char *errstr, size_t errstr_size)
{
    char id[MAX_NAME + 1], path[4096];
    int made = 0;

    memset(m, 0, sizeof(*m));
    dir[0] = '\0';
    if (!bk_snapshot_name_ok(task) || strlen(task) > 160) {
        snprintf(errstr, errstr_size, "snapshot: bad task name '%s'", task);
        return -1;
    }
    if (bk_store_mkdirs(root) != 0) {
        snprintf(errstr, errstr_size, "cannot create the snapshot directory %s: %s", root,
                 strerror(errno));
        return -1;
    }
    m->created_ms = now_ms();
    /* unique under root: RocksDB builds the checkpoint in <dir>.tmp, then renames it */
    for (int k = 0;; k++) {
        char tmp[4096];
        if (k == 0) {
            snprintf(id, sizeof(id), "%s-%lld-%d", task, (long long)m->created_ms, (int)getpid());
        } else {
            snprintf(id, sizeof(id), "%s-%lld-%d-%d", task, (long long)m->created_ms, (int)getpid(),
                     k);
        }
        if ((size_t)snprintf(dir, dir_size, "%s/%s", root, id) >= dir_size) {
            snprintf(errstr, errstr_size, "snapshot: directory name too long under %s", root);
            goto fail;
        }
        snprintf(tmp, sizeof(tmp), "%s.tmp", dir);
        if (!exists(dir) && !exists(tmp)) {
            break;
        }
    }
    if (bk_db_checkpoint_to(db, dir, errstr, errstr_size) != 0) {
        goto fail;
    }
    made = 1;
    if (list_files(dir, m, errstr, errstr_size) != 0) {
        goto fail;
    }
    m->stores = calloc((size_t)bk_db_store_count(db) + 1, sizeof(*m->stores));
    for (int i = 0; i < bk_db_store_count(db); i++) {
        bk_store_t *st = bk_db_store(db, i);
        bk_snapshot_store_t *s = &m->stores[m->nstores];
        int32_t partition;
        const char *topic = bk_store_changelog_topic(st, &partition);
        if (!bk_store_logged(st)) {
            continue; /* no changelog to resume: its state is all in the files */
        }
        if (!topic) {
            snprintf(errstr, errstr_size, "snapshot: store %s has no changelog topic set",
                     bk_store_name(st));
            goto fail;
        }
        s->name = strdup(bk_store_name(st));
        s->changelog = strdup(topic);
        s->partition = partition;
        s->next = bk_store_changelog_next(st);
        s->ninputs = bk_store_input(st, s->inputs);
        m->nstores++;
    }
    m->task = strdup(task);
    m->id = strdup(id);
    /* last: a directory without a manifest is a snapshot cut short */
    snprintf(path, sizeof(path), "%s/%s", dir, BK_SNAPSHOT_MANIFEST);
    if (bk_manifest_write(m, path, errstr, errstr_size) != 0) {
        goto fail;
    }
    return 0;

fail:
    if (made) {
        bk_snapshot_remove(dir);
    }
    bk_manifest_free(m);
    return -1;
}

/* -- Sweep ----------------------------------------------------------------------------- */

int bk_snapshot_sweep(const char *root, int64_t ttl_ms, int64_t now)
{
    DIR *d = opendir(root);
    struct dirent *e;
    char **names = NULL;
    int n = 0, cap = 0, removed = 0;

    if (!d) {
        return 0;
    }
    /* collected first: no removal while the directory is read */
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            names = realloc(names, (size_t)cap * sizeof(*names));
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        char dir[3072], path[4096], err[512], *text;
        size_t len;
        struct stat sb;
        int64_t born;
        bk_manifest_t m;

        snprintf(dir, sizeof(dir), "%s/%s", root, names[i]);
        free(names[i]);
        if (lstat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
            continue;
        }
        born = (int64_t)sb.st_mtim.tv_sec * 1000 + sb.st_mtim.tv_nsec / 1000000;
        snprintf(path, sizeof(path), "%s/%s", dir, BK_SNAPSHOT_MANIFEST);
        if (read_all(path, &text, &len, err, sizeof(err)) == 0) {
            if (bk_manifest_parse(text, len, &m, err, sizeof(err)) == 0) {
                born = m.created_ms;
                bk_manifest_free(&m);
            }
            free(text);
        }
        if (now - born > ttl_ms) {
            if (bk_snapshot_remove(dir) == 0) {
                removed++;
            } else {
                bk_log_warn("snapshot: cannot remove %s: %s", dir, strerror(errno));
            }
        }
    }
    free(names);
    return removed;
}

/* -- Install --------------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every entry of fetched_dir is a regular file the manifest lists (or the manifest). */
static int check_entries(const bk_manifest_t *m, const char *fetched_dir, char *errstr,
                         size_t errstr_size)
{
    const char **names = malloc(((size_t)m->nfiles + 1) * sizeof(*names));
    DIR *d = opendir(fetched_dir);
    struct dirent *e;
    int rc = 0;
    char nb[80];

    if (!d) {
        snprintf(errstr, errstr_size, "cannot list %s: %s", fetched_dir, strerror(errno));
        free(names);
        return -1;
    }
    for (int i = 0; i < m->nfiles; i++) {
        names[i] = m->files[i].name;
    }
    qsort(names, (size_t)m->nfiles, sizeof(*names), cmp_str);
    while (rc == 0 && (e = readdir(d)) != NULL) {
        char path[4096];
        struct stat sb;
        const char *key = e->d_name;
        if (strcmp(key, ".") == 0 || strcmp(key, "..") == 0) {
            continue;
        }
        snprintf(path, sizeof(path), "%s/%s", fetched_dir, key);
        if (lstat(path, &sb) != 0) {
            snprintf(errstr, errstr_size, "%s: %s", shown(key, nb, sizeof(nb)), strerror(errno));
            rc = -1;
        } else if (S_ISLNK(sb.st_mode)) {
            snprintf(errstr, errstr_size, "%s: a symbolic link: refused",
                     shown(key, nb, sizeof(nb)));
            rc = -1;
        } else if (!S_ISREG(sb.st_mode)) {
            snprintf(errstr, errstr_size, "%s: not a regular file: refused",
                     shown(key, nb, sizeof(nb)));
            rc = -1;
        } else if (strcmp(key, BK_SNAPSHOT_MANIFEST) != 0 &&
                   !bsearch(&key, names, (size_t)m->nfiles, sizeof(*names), cmp_str)) {
            snprintf(errstr, errstr_size, "%s: not in the manifest: refused",
                     shown(key, nb, sizeof(nb)));
            rc = -1;
        }
    }
    closedir(d);
    free(names);
    return rc;
}

/* Size and checksum of every listed file; each is synced, for the install to be durable. */
static int check_files(const bk_manifest_t *m, const char *fetched_dir, char *errstr,
                       size_t errstr_size)
{
    for (int i = 0; i < m->nfiles; i++) {
        const bk_snapshot_file_t *f = &m->files[i];
        char path[4096], err[512];
        uint64_t h, size;
        int fd, rc;

        if (!bk_snapshot_name_ok(f->name) || strcmp(f->name, "rocksdb") == 0 ||
            strcmp(f->name, "checkpoint") == 0 || strcmp(f->name, "checkpoint.tmp") == 0 ||
            strcmp(f->name, BK_SNAPSHOT_MANIFEST) == 0) {
            /* the last ones are the task directory's own: no RocksDB file has those names */
            snprintf(errstr, errstr_size, "%s: not a name a snapshot file can have: refused",
                     shown(f->name, err, sizeof(err)));
            return -1;
        }
        snprintf(path, sizeof(path), "%s/%s", fetched_dir, f->name);
        fd = open_regular(path, f->name, err, sizeof(err));
        if (fd < 0) {
            snprintf(errstr, errstr_size, "%s: refused", err);
            return -1;
        }
        rc = hash_fd(fd, &h, &size, err, sizeof(err));
        if (rc != 0) {
            snprintf(errstr, errstr_size, "%s: %s", f->name, err);
        } else if (size != f->size) {
            snprintf(errstr, errstr_size, "%s: %llu bytes, expected %llu: refused", f->name,
                     (unsigned long long)size, (unsigned long long)f->size);
            rc = -1;
        } else if (h != f->xxh3) {
            snprintf(errstr, errstr_size, "%s: checksum %016llx, expected %016llx: refused",
                     f->name, (unsigned long long)h, (unsigned long long)f->xxh3);
            rc = -1;
        } else if (fsync(fd) != 0) {
            snprintf(errstr, errstr_size, "%s: cannot sync: %s", f->name, strerror(errno));
            rc = -1;
        }
        close(fd);
        if (rc != 0) {
            return -1;
        }
    }
    return 0;
}

/* fetched_dir becomes a task directory: its files move to rocksdb/ and the checkpoint file
 * is written beside. Only fetched_dir changes. */
static int lay_out(const bk_manifest_t *m, const char *fetched_dir, char *errstr,
                   size_t errstr_size)
{
    char db[3072];
    bk_checkpoint_line_t *lines;
    int n = 0, rc;

    snprintf(db, sizeof(db), "%s/rocksdb", fetched_dir);
    if (mkdir(db, 0755) != 0) {
        snprintf(errstr, errstr_size, "cannot create %s: %s", db, strerror(errno));
        return -1;
    }
    for (int i = 0; i < m->nfiles; i++) {
        char from[4096], to[4096];
        snprintf(from, sizeof(from), "%s/%s", fetched_dir, m->files[i].name);
        snprintf(to, sizeof(to), "%s/%s", db, m->files[i].name);
        if (rename(from, to) != 0) {
            snprintf(errstr, errstr_size, "cannot move %s to %s: %s", from, to, strerror(errno));
            return -1;
        }
    }
    sync_dir(db);
    lines = calloc((size_t)m->nstores + 1, sizeof(*lines));
    for (int i = 0; i < m->nstores; i++) {
        const bk_snapshot_store_t *s = &m->stores[i];
        if (s->next >= 0) { /* as bk_db_checkpoint: no line while the offset is unknown */
            assert(s->ninputs >= 0 && s->ninputs <= BK_STORE_MAX_INPUTS);
            lines[n].store = s->name;
            lines[n].next = s->next;
            lines[n].ninputs = s->ninputs;
            lines[n].inputs = s->inputs;
            n++;
        }
    }
    rc = bk_db_checkpoint_file_write(fetched_dir, lines, n, errstr, errstr_size);
    free(lines);
    return rc;
}

int bk_snapshot_install(const bk_manifest_t *m, const char *fetched_dir, const char *task_dir,
                        char *errstr, size_t errstr_size)
{
    static int seq; /* trash names of one process */
    char parent[4096], trash[4096];
    const char *base = strrchr(task_dir, '/');
    int had_task;

    /* task directories are named after their task (bk_plan_task_dir) */
    if (strcmp(base ? base + 1 : task_dir, m->task) != 0) {
        snprintf(errstr, errstr_size, "a snapshot of task %s cannot become %s: refused", m->task,
                 task_dir);
        return -1;
    }
    if (check_entries(m, fetched_dir, errstr, errstr_size) != 0 ||
        check_files(m, fetched_dir, errstr, errstr_size) != 0 ||
        lay_out(m, fetched_dir, errstr, errstr_size) != 0) {
        return -1;
    }
    parent_of(task_dir, parent, sizeof(parent));
    if (bk_store_mkdirs(parent) != 0) {
        snprintf(errstr, errstr_size, "cannot create %s: %s", parent, strerror(errno));
        return -1;
    }
    /* the swap: task_dir aside, fetched_dir in its place, the old one removed */
    had_task = exists(task_dir);
    snprintf(trash, sizeof(trash), "%s.trash-%d-%d", task_dir, (int)getpid(),
             __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
    if (had_task && rename(task_dir, trash) != 0) {
        snprintf(errstr, errstr_size, "cannot move %s aside to %s: %s", task_dir, trash,
                 strerror(errno));
        return -1;
    }
    if (rename(fetched_dir, task_dir) != 0) {
        snprintf(errstr, errstr_size, "cannot rename %s to %s: %s", fetched_dir, task_dir,
                 strerror(errno));
        if (had_task && rename(trash, task_dir) != 0) {
            bk_log_warn("snapshot: cannot move %s back to %s: %s", trash, task_dir,
                        strerror(errno));
        }
        return -1;
    }
    sync_dir(parent);
    if (had_task && rm_tree(trash) != 0) {
        bk_log_warn("snapshot: installed %s, but cannot remove the old state in %s: %s", task_dir,
                    trash, strerror(errno));
    }
    return 0;
}

/* -- FFI: for specs -------------------------------------------------------------------- */

static __thread char ffi_err[1024];

int bk_ffi_snapshot_manifest_rewrite(const char *in_path, const char *out_path, const char **err)
{
    char *text;
    size_t len;
    bk_manifest_t m;
    int rc;

    *err = ffi_err;
    if (read_all(in_path, &text, &len, ffi_err, sizeof(ffi_err)) != 0) {
        return BK_FFI_ERR;
    }
    rc = bk_manifest_parse(text, len, &m, ffi_err, sizeof(ffi_err));
    free(text);
    if (rc != 0) {
        return BK_FFI_ERR;
    }
    rc = out_path ? bk_manifest_write(&m, out_path, ffi_err, sizeof(ffi_err)) : 0;
    if (rc == 0) {
        rc = m.nfiles;
    }
    bk_manifest_free(&m);
    return rc < 0 ? BK_FFI_ERR : rc;
}

int bk_ffi_snapshot_install(const char *fetched_dir, const char *task_dir, const char **err)
{
    char path[4096], *text;
    size_t len;
    bk_manifest_t m;
    int rc;

    *err = ffi_err;
    snprintf(path, sizeof(path), "%s/%s", fetched_dir, BK_SNAPSHOT_MANIFEST);
    if (read_all(path, &text, &len, ffi_err, sizeof(ffi_err)) != 0) {
        return BK_FFI_ERR;
    }
    rc = bk_manifest_parse(text, len, &m, ffi_err, sizeof(ffi_err));
    free(text);
    if (rc != 0) {
        return BK_FFI_ERR;
    }
    rc = bk_snapshot_install(&m, fetched_dir, task_dir, ffi_err, sizeof(ffi_err));
    bk_manifest_free(&m);
    return rc == 0 ? BK_FFI_OK : BK_FFI_ERR;
}

int bk_ffi_snapshot_sweep(const char *root, int64_t ttl_ms, int64_t now)
{
    return bk_snapshot_sweep(root, ttl_ms, now);
}

int bk_ffi_snapshot_file_xxh3(const char *path, uint64_t *xxh3, uint64_t *size, const char **err)
{
    *err = ffi_err;
    return bk_snapshot_file_xxh3(path, xxh3, size, ffi_err, sizeof(ffi_err)) == 0 ? BK_FFI_OK
                                                                                  : BK_FFI_ERR;
}
