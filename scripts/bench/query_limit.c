/* query_limit.c - the HTTP limit scripts/bench/query measures beck's query server against:
 * libmicrohttpd with the settings runtime/query/query.c uses (its internal thread pool of 4,
 * epoll), answering every GET with a fixed JSON body of the size of a key's answer.
 *   query_limit PORT   serves until killed; prints "ready" once listening. */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char body[] = "{\"store\":\"kv\",\"key\":\"k0000123456\",\"value\":\"v000000000000000"
                           "0000000000000000000000000000000000000000000000000000000000000000000"
                           "0000000000000000\",\"task\":\"0_3\",\"node\":\"n1\",\"role\":\"active\","
                           "\"lag\":0}\n";

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload,
                                  size_t *upload_size, void **state)
{
    static int started;
    struct MHD_Response *r;
    enum MHD_Result rc;
    (void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_size;
    if (!*state) {
        *state = &started;
        return MHD_YES;
    }
    r = MHD_create_response_from_buffer(sizeof(body) - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Content-Type", "application/json");
    rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return rc;
}

int main(int argc, char **argv)
{
    struct MHD_Daemon *d;
    if (argc != 2) {
        fprintf(stderr, "usage: query_limit PORT\n");
        return 2;
    }
    d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL, (uint16_t)atoi(argv[1]),
                         NULL, NULL, on_request, NULL, MHD_OPTION_THREAD_POOL_SIZE, 4U,
                         MHD_OPTION_CONNECTION_LIMIT, 512U, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "query_limit: cannot listen on %s\n", argv[1]);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        pause();
    }
}
