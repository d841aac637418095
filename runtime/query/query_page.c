/* query_page.c - GET /: the status page (runtime/query/page.html, docs/queries.md), a
 * self-contained HTML page with no outside assets that renders GET /v1/status and refreshes
 * itself. The HTML is part of the binary (the assembler's .incbin at build time), so that a
 * node serves it from anywhere. */
#include <string.h>

#include "query/query_internal.h"

/* page.html's bytes, and a NUL (the Makefile rebuilds this file when the page changes) */
__asm__(".section .rodata\n"
        ".global bk_query_page_html\n"
        ".type bk_query_page_html, @object\n"
        "bk_query_page_html:\n"
        ".incbin \"runtime/query/page.html\"\n"
        ".byte 0\n"
        ".previous\n");
extern const char bk_query_page_html[];

enum MHD_Result bk_query_page(bk_qreq_t *r)
{
    return bk_query_reply_raw(r, 200, "text/html; charset=utf-8", bk_query_page_html,
                              strlen(bk_query_page_html), -1);
}
