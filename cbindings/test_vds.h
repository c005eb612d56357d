/*
 * What the files of the C test of libvds share: the counters and macros of
 * the checks, and paths in the scratch directory.
 */
#ifndef VDS_TEST_H
#define VDS_TEST_H

#include "vds.h"

#include <stdio.h>
#include <string.h>

extern int checks;
extern int failures;

#define CHECK(cond)                                                                 \
    do {                                                                            \
        checks++;                                                                   \
        if (!(cond)) {                                                              \
            failures++;                                                             \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
        }                                                                           \
    } while (0)

/* `call` must return `code`, and on failure the message must contain `text`. */
#define EXPECT(call, code, text)                                                                         \
    do {                                                                                                 \
        vds_status st_ = (call);                                                                         \
        checks++;                                                                                        \
        if (st_ != (code)) {                                                                             \
            failures++;                                                                                  \
            fprintf(stderr, "%s:%d: %s returned %d (%s), expected %d (%s); message: %s\n", __FILE__,     \
                    __LINE__, #call, (int)st_, vds_status_str(st_), (int)(code), vds_status_str(code),   \
                    vds_last_error_message());                                                           \
        } else if ((code) != VDS_OK && strstr(vds_last_error_message(), (text)) == NULL) {               \
            failures++;                                                                                  \
            fprintf(stderr, "%s:%d: %s: message \"%s\" does not mention \"%s\"\n", __FILE__, __LINE__,   \
                    #call, vds_last_error_message(), (text));                                            \
        }                                                                                                \
    } while (0)

#define OK(call) EXPECT(call, VDS_OK, "")

/* NAME in the scratch directory; the last four results stay valid. */
const char *path_in(const char *name);

/* test_vds_layers.c: levels of detail, tiles, blocks, quantization, masks,
 * margins, growth, fragments, writing back, the bounded codec. */
void test_layers(void);
void test_blocks(void);
void test_quantization(void);
void test_mask(void);
void test_margins(void);
void test_growth(void);
void test_fragments(void);
void test_write_back(void);
void test_bounded(void);

#endif
