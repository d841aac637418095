/* manifest.c - parse and write a snapshot's manifest (manifest.h). */
#include "engine/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fs.h"
#include "base/log.h"

#define MAX_NAME 255
#define MAX_STORES 4096 /* store lines of one manifest; a task has a handful */
#define MAX_TOKENS (10 + BK_STORE_MAX_INPUTS + 1)

/* -- Names ----------------------------------------------------------------------------- */

int bk_manifest_name_ok(const char *name)
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
                         bk_log_shown(tok[1], nb, sizeof(nb)));
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
            if (!bk_manifest_name_ok(tok[1])) {
                line_err(errstr, errstr_size, lineno, "%s '%s' %s: refused", tok[0],
                         bk_log_shown(tok[1], nb, sizeof(nb)), name_problem(tok[1]));
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
            bk_manifest_store_t *s;
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
                         bk_log_shown(tok[8], nb, sizeof(nb)), BK_STORE_MAX_INPUTS);
                goto out;
            }
            if (n != 9 + k) {
                line_err(errstr, errstr_size, lineno, "%d input offsets where %d are announced",
                         n - 9, (int)k);
                goto out;
            }
            for (int i = 1; i <= 3; i += 2) {
                if (!bk_manifest_name_ok(tok[i])) {
                    line_err(errstr, errstr_size, lineno, "%s name '%s' %s: refused",
                             i == 1 ? "store" : "changelog", bk_log_shown(tok[i], nb, sizeof(nb)),
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
                             bk_log_shown(tok[9 + i], nb, sizeof(nb)));
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
            bk_manifest_file_t *f;
            uint64_t size, h;
            if (n != 4) {
                line_err(errstr, errstr_size, lineno, "expected 'file SIZE XXH3 NAME'");
                goto out;
            }
            if (parse_u64(tok[1], &size) != 0) {
                line_err(errstr, errstr_size, lineno, "file size '%s' is not an integer >= 0",
                         bk_log_shown(tok[1], nb, sizeof(nb)));
                goto out;
            }
            if (parse_hex64(tok[2], &h) != 0) {
                line_err(errstr, errstr_size, lineno, "checksum '%s' is not 16 hex digits: refused",
                         bk_log_shown(tok[2], nb, sizeof(nb)));
                goto out;
            }
            if (!bk_manifest_name_ok(tok[3])) {
                line_err(errstr, errstr_size, lineno, "file name '%s' %s: refused",
                         bk_log_shown(tok[3], nb, sizeof(nb)), name_problem(tok[3]));
                goto out;
            }
            if (strcmp(tok[3], BK_MANIFEST_NAME) == 0) {
                line_err(errstr, errstr_size, lineno, "the manifest lists itself: refused");
                goto out;
            }
            if (m->nfiles == BK_MANIFEST_MAX_FILES) {
                line_err(errstr, errstr_size, lineno, "more than %d files: refused",
                         BK_MANIFEST_MAX_FILES);
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
                     bk_log_shown(tok[0], nb, sizeof(nb)));
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
    if (!m->task || !bk_manifest_name_ok(m->task) || !m->id || !bk_manifest_name_ok(m->id) ||
        m->created_ms < 0) {
        snprintf(errstr, errstr_size, "manifest: bad task, id or created_ms");
        return -1;
    }
    for (int i = 0; i < m->nstores; i++) {
        const bk_manifest_store_t *s = &m->stores[i];
        if (!bk_manifest_name_ok(s->name) || !bk_manifest_name_ok(s->changelog) ||
            s->partition < 0 || s->next < -1 || s->ninputs < 0 ||
            s->ninputs > BK_STORE_MAX_INPUTS) {
            snprintf(errstr, errstr_size, "manifest: store '%s' cannot be written", s->name);
            return -1;
        }
    }
    if (m->nfiles > BK_MANIFEST_MAX_FILES) {
        snprintf(errstr, errstr_size, "manifest: more than %d files", BK_MANIFEST_MAX_FILES);
        return -1;
    }
    for (int i = 0; i < m->nfiles; i++) {
        if (!bk_manifest_name_ok(m->files[i].name) ||
            strcmp(m->files[i].name, BK_MANIFEST_NAME) == 0) {
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
        const bk_manifest_store_t *s = &m->stores[i];
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
    bk_fs_parent(path, dir, sizeof(dir));
    bk_fs_sync_dir(dir);
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

int bk_manifest_read(const char *path, bk_manifest_t *m, char *errstr, size_t errstr_size)
{
    char *text;
    size_t len;
    int rc;

    if (bk_fs_read_all(path, BK_MANIFEST_MAX_BYTES, &text, &len, errstr, errstr_size) != 0) {
        return -1;
    }
    rc = bk_manifest_parse(text, len, m, errstr, errstr_size);
    free(text);
    return rc;
}
