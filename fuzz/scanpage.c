/* scanpage.c - fuzz target: a page of a range scan from another node (query/scanpage.c), as
 * the node gathering a range reads one. What parses must encode and parse back to the same
 * entries. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "query/scanpage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    bk_scanpage_t p, q;
    bk_jbuf_t b = {0};
    if (bk_scanpage_parse((const char *)data, size, &p) != 0) {
        return 0;
    }
    bk_scanpage_encode(&p, &b);
    if (b.oom || bk_scanpage_parse(b.p, b.len, &q) != 0 || q.n != p.n || q.more != p.more ||
        q.role != p.role || q.lag != p.lag) {
        abort();
    }
    for (int i = 0; i < p.n; i++) {
        if (q.e[i].kl != p.e[i].kl || q.e[i].vl != p.e[i].vl ||
            memcmp(q.e[i].k, p.e[i].k, p.e[i].kl) != 0 ||
            memcmp(q.e[i].v, p.e[i].v, p.e[i].vl) != 0) {
            abort();
        }
    }
    bk_scanpage_free(&p);
    bk_scanpage_free(&q);
    bk_jbuf_free(&b);
    return 0;
}
