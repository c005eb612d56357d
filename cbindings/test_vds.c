/*
 * The C test of libvds: calls every function of vds.h with good and bad
 * inputs (NULL pointers, closed handles, handles of the wrong kind, small
 * buffers, overflowing lengths, corrupt files) and checks both the status
 * and the message of every failure. Levels of detail, tiles and the other
 * features are tested in test_vds_layers.c.
 *
 * Usage: test_vds SCRATCH_DIR    (exit status 0 when every check passed)
 */
#define _POSIX_C_SOURCE 200809L
#include "test_vds.h"

#include <math.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

int checks = 0;
int failures = 0;


static char dir[1024];

const char *path_in(const char *name) {
    static char buf[4][1200];
    static int turn = 0;
    turn = (turn + 1) % 4;
    snprintf(buf[turn], sizeof buf[turn], "%s/%s", dir, name);
    return buf[turn];
}

static unsigned char *read_file(const char *path, long *len) {
    FILE *f = fopen(path, "rb");
    unsigned char *data;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    data = malloc((size_t)*len);
    if (data && fread(data, 1, (size_t)*len, f) != (size_t)*len) {
        free(data);
        data = NULL;
    }
    fclose(f);
    return data;
}

static void write_file(const char *path, const unsigned char *data, long len) {
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(data, 1, (size_t)len, f);
    fclose(f);
}

/* A copy of `src` at `dst` with byte `at` flipped. */
static void flip_copy(const char *src, const char *dst, long at) {
    long len = 0;
    unsigned char *data = read_file(src, &len);
    CHECK(data != NULL && at < len);
    if (!data || at >= len) {
        free(data);
        return;
    }
    data[at] ^= 0x04;
    write_file(dst, data, len);
    free(data);
}

/* Offset of the body: one past the second newline, plus the two commit slots. */
static long body_offset(const char *path) {
    long len = 0, i, newlines = 0, at = -1;
    unsigned char *data = read_file(path, &len);
    for (i = 0; data && i < len; i++) {
        if (data[i] == '\n' && ++newlines == 2) {
            /* Two 512-byte commit slots after a head of a multiple of 4096
               bytes, two 128-byte ones in the compact layout (SPEC.md 1.1). */
            at = i + 1 + ((i + 1) % 4096 == 0 ? 1024 : 256);
            break;
        }
    }
    free(data);
    return at;
}

#define NI 20
#define NX 12
#define NT 30

static float amplitude(int i, int x, int t) { return (float)(i * 1000 + x * 10) + (float)t * 0.5f; }

static void test_version_and_status(void) {
    char expected[64];
    snprintf(expected, sizeof expected, "%d.%d.%d", VDS_VERSION_MAJOR, VDS_VERSION_MINOR, VDS_VERSION_PATCH);
    CHECK(strcmp(vds_version(), expected) == 0);
    CHECK(vds_version_number() == VDS_VERSION_NUMBER);
    CHECK(VDS_VERSION_CHECK(0, 0, 1));
    CHECK(!VDS_VERSION_CHECK(VDS_VERSION_MAJOR + 1, 0, 0));
    CHECK(strcmp(vds_status_str(VDS_OK), "ok") == 0);
    CHECK(strcmp(vds_status_str(VDS_ERR_CORRUPT), "corrupt file") == 0);
    CHECK(strcmp(vds_status_str(VDS_ERR_BAD_HANDLE), "bad handle") == 0);
    CHECK(strcmp(vds_status_str(12345), "unknown status") == 0);
    CHECK(vds_last_error_message() != NULL);
}

/* Builds the test container; returns a writable handle. */
static vds_dataset *create_dataset(const char *path) {
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    const char *vol_axes[] = {"inline", "crossline", "time"};
    const char *map_axes[] = {"inline", "crossline"};
    const char *time_axis[] = {"time"};
    const uint64_t vol_chunk[] = {8, 8, 16};
    const uint64_t map_chunk[] = {16, 16};
    float fill = -999.25f;
    int64_t ifill = -1;

    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "inline", NI, NULL, 100.0, 119.0));
    OK(vds_builder_add_axis(b, "crossline", NX, "m", 0.0, 275.0));
    OK(vds_builder_add_axis(b, "time", NT, "ms", 0.0, 116.0));
    OK(vds_builder_add_variable(b, "amplitude", VDS_FLOAT32, vol_axes, 3, vol_chunk));
    OK(vds_builder_add_variable(b, "present", VDS_BOOL, map_axes, 2, map_chunk));
    OK(vds_builder_add_variable(b, "count", VDS_INT64, time_axis, 1, NULL));
    OK(vds_builder_set_fill(b, "amplitude", (const uint8_t *)&fill, sizeof fill));
    OK(vds_builder_set_fill(b, "count", (const uint8_t *)&ifill, sizeof ifill));
    OK(vds_builder_set_codec(b, "amplitude", VDS_COMPRESSION_DEFLATE, 6, true));
    OK(vds_builder_set_codec(b, "count", VDS_COMPRESSION_ZSTD, 3, true));
    OK(vds_builder_set_codec(b, "present", VDS_COMPRESSION_ZSTD, 1, false)); /* zstd frames decoded under valgrind */
    OK(vds_builder_set_unit(b, "amplitude", "Pa"));
    OK(vds_builder_set_attribute(b, NULL, "survey", "\"C test\""));
    OK(vds_builder_set_attribute(b, "amplitude", "scale", "{\"factor\": 0.5}"));
    OK(vds_builder_add_external_slot(b, "c_test.vds.1"));
    OK(vds_builder_set_overwrite(b, true));
    OK(vds_builder_set_durability(b, VDS_DURABILITY_FSYNC));

    /* Bad builder inputs. */
    EXPECT(vds_builder_new(NULL), VDS_ERR_NULL_POINTER, "out_builder is NULL");
    EXPECT(vds_builder_add_axis(NULL, "x", 1, NULL, 0, 0), VDS_ERR_NULL_POINTER, "builder handle is NULL");
    EXPECT(vds_builder_add_axis(b, NULL, 1, NULL, 0, 0), VDS_ERR_NULL_POINTER, "name is NULL");
    EXPECT(vds_builder_add_axis(b, "\xff\xfe", 1, NULL, 0, 0), VDS_ERR_INVALID_ARGUMENT, "not valid UTF-8");
    EXPECT(vds_builder_add_variable(b, "x", 42, vol_axes, 3, NULL), VDS_ERR_INVALID_ARGUMENT, "42 is not a vds_dtype");
    EXPECT(vds_builder_add_variable(b, "x", VDS_INT8, vol_axes, 0, NULL), VDS_ERR_INVALID_ARGUMENT, "naxes is 0");
    EXPECT(vds_builder_add_variable(b, "x", VDS_INT8, vol_axes, 9, NULL), VDS_ERR_INVALID_ARGUMENT, "at most 8");
    EXPECT(vds_builder_add_variable(b, "x", VDS_INT8, NULL, 2, NULL), VDS_ERR_NULL_POINTER, "axes is NULL");
    EXPECT(vds_builder_set_fill(b, "nope", (const uint8_t *)&fill, 4), VDS_ERR_NOT_FOUND, "no variable named \"nope\"");
    EXPECT(vds_builder_set_fill(b, "amplitude", (const uint8_t *)&fill, 2), VDS_ERR_TYPE_MISMATCH, "float32 (4 bytes)");
    EXPECT(vds_builder_set_fill(b, "amplitude", NULL, 4), VDS_ERR_NULL_POINTER, "value is NULL");
    EXPECT(vds_builder_set_fill(b, "amplitude", (const uint8_t *)vol_chunk, 9), VDS_ERR_INVALID_ARGUMENT, "at most 8");
    EXPECT(vds_builder_set_codec(b, "amplitude", VDS_COMPRESSION_DEFLATE, 12, true), VDS_ERR_INVALID_ARGUMENT, "level 12");
    EXPECT(vds_builder_set_codec(b, "amplitude", 7, 1, true), VDS_ERR_INVALID_ARGUMENT, "unknown compression 7");
    EXPECT(vds_builder_set_codec(b, "count", VDS_COMPRESSION_ZSTD, 0, true), VDS_ERR_INVALID_ARGUMENT, "zstd level 0 is not in 1..22");
    EXPECT(vds_builder_set_codec(b, "count", VDS_COMPRESSION_ZSTD, 23, true), VDS_ERR_INVALID_ARGUMENT, "zstd level 23");
    EXPECT(vds_builder_set_attribute(b, NULL, "k", "{not json"), VDS_ERR_INVALID_ARGUMENT, "malformed JSON");
    EXPECT(vds_builder_set_durability(b, 5), VDS_ERR_INVALID_ARGUMENT, "not a vds_durability");
    EXPECT(vds_builder_set_layout(b, 3), VDS_ERR_INVALID_ARGUMENT, "3 is not a vds_layout");
    EXPECT(vds_builder_set_layout(NULL, VDS_LAYOUT_AUTO), VDS_ERR_NULL_POINTER, "builder handle is NULL");
    EXPECT(vds_builder_create(b, path, NULL), VDS_ERR_NULL_POINTER, "out_dataset is NULL");
    EXPECT(vds_builder_create(b, NULL, &ds), VDS_ERR_NULL_POINTER, "path is NULL");

    OK(vds_builder_create(b, path, &ds));
    CHECK(ds != NULL);
    /* The builder stays usable; without overwrite, an existing file is refused. */
    OK(vds_builder_set_overwrite(b, false));
    {
        vds_dataset *again = NULL;
        EXPECT(vds_builder_create(b, path, &again), VDS_ERR_ALREADY_EXISTS, "c_test.vds");
        CHECK(again == NULL);
    }
    OK(vds_builder_free(b));
    EXPECT(vds_builder_add_axis(b, "x", 1, NULL, 0, 0), VDS_ERR_BAD_HANDLE, "not a live handle");
    EXPECT(vds_builder_free(b), VDS_ERR_BAD_HANDLE, "not a live handle");
    OK(vds_builder_free(NULL));

    /* Inconsistent descriptions are refused by create, with the reason. */
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "x", 10, NULL, 0, 9));
    OK(vds_builder_add_variable(b, "v", VDS_INT8, time_axis, 1, NULL));
    {
        vds_dataset *bad = NULL;
        EXPECT(vds_builder_create(b, path_in("bad.vds"), &bad), VDS_ERR_INVALID_ARGUMENT, "unknown axis \"time\"");
        CHECK(bad == NULL);
    }
    OK(vds_builder_free(b));
    return ds;
}

static void test_write_and_read(vds_dataset *ds) {
    static float vol[NI * NX * NT], back[NI * NX * NT];
    uint8_t present[NI * NX], present_back[NI * NX];
    int64_t counts[NT], counts_back[NT];
    const uint64_t start[] = {0, 0, 0}, shape[] = {NI, NX, NT};
    int i, x, t, bad = 0;

    for (i = 0; i < NI; i++)
        for (x = 0; x < NX; x++)
            for (t = 0; t < NT; t++) vol[(i * NX + x) * NT + t] = amplitude(i, x, t);
    for (i = 0; i < NI * NX; i++) present[i] = (uint8_t)(i % 3 == 0 ? 0 : 2); /* any non-zero is true */
    for (t = 0; t < NT; t++) counts[t] = 7; /* one chunk of one value: a constant entry */

    OK(vds_write(ds, 0, VDS_FLOAT32, start, shape, NULL, 3, VDS_ORDER_C, (const uint8_t *)vol, sizeof vol));
    OK(vds_write(ds, 1, VDS_BOOL, start, shape, NULL, 2, VDS_ORDER_C, present, sizeof present));
    OK(vds_write(ds, 2, VDS_INT64, start, &shape[2], NULL, 1, VDS_ORDER_C, (const uint8_t *)counts, sizeof counts));

    /* Read back in Fortran order: the first axis varies fastest. */
    OK(vds_read(ds, 0, VDS_FLOAT32, start, shape, NULL, 3, VDS_ORDER_FORTRAN, (uint8_t *)back, sizeof back));
    for (i = 0; i < NI; i++)
        for (x = 0; x < NX; x++)
            for (t = 0; t < NT; t++)
                if (back[i + NI * (x + NX * t)] != amplitude(i, x, t)) bad++;
    CHECK(bad == 0);
    OK(vds_read(ds, 1, VDS_BOOL, start, shape, NULL, 2, VDS_ORDER_C, present_back, sizeof present_back));
    for (i = 0; i < NI * NX; i++) CHECK(present_back[i] == (present[i] != 0));
    OK(vds_read(ds, 2, VDS_INT64, start, &shape[2], NULL, 1, VDS_ORDER_C, (uint8_t *)counts_back, sizeof counts_back));
    CHECK(memcmp(counts, counts_back, sizeof counts) == 0);

    /* A strided region: every 3rd inline, crossline 5, times 2..9. */
    {
        const uint64_t s0[] = {1, 5, 2}, sh[] = {6, 1, 8}, st[] = {3, 1, 1};
        float sub[6 * 8];
        OK(vds_read(ds, 0, VDS_FLOAT32, s0, sh, st, 3, VDS_ORDER_C, (uint8_t *)sub, sizeof sub));
        for (i = 0; i < 6; i++)
            for (t = 0; t < 8; t++) CHECK(sub[i * 8 + t] == amplitude(1 + 3 * i, 5, 2 + t));
    }

    /* Bad region and buffer inputs. */
    {
        const uint64_t beyond[] = {0, 0, 1};
        const uint64_t zero_step[] = {1, 0, 1};
        const uint64_t nine[9] = {0};
        EXPECT(vds_write(ds, 0, VDS_FLOAT64, start, shape, NULL, 3, VDS_ORDER_C, (const uint8_t *)vol, sizeof vol), VDS_ERR_TYPE_MISMATCH,
               "holds float32, the buffer holds float64");
        EXPECT(vds_read(ds, 0, VDS_FLOAT32, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)back, sizeof back - 4), VDS_ERR_BUFFER_TOO_SMALL,
               "needs a buffer of 28800 bytes");
        EXPECT(vds_read(ds, 0, VDS_FLOAT32, beyond, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)back, sizeof back), VDS_ERR_OUT_OF_RANGE,
               "beyond the extent 30");
        EXPECT(vds_read(ds, 0, VDS_FLOAT32, start, shape, NULL, 2, VDS_ORDER_C, (uint8_t *)back, sizeof back), VDS_ERR_INVALID_ARGUMENT,
               "has 3 dimensions but the region has 2");
        EXPECT(vds_read(ds, 0, VDS_FLOAT32, nine, nine, NULL, 9, VDS_ORDER_C, (uint8_t *)back, sizeof back), VDS_ERR_INVALID_ARGUMENT,
               "at most 8");
        EXPECT(vds_read(ds, 0, VDS_FLOAT32, start, shape, NULL, 0, VDS_ORDER_C, (uint8_t *)back, sizeof back), VDS_ERR_INVALID_ARGUMENT,
               "ndim is 0");
        EXPECT(vds_read(ds, 0, VDS_FLOAT32, start, shape, zero_step, 3, VDS_ORDER_C, (uint8_t *)back, sizeof back), VDS_ERR_INVALID_ARGUMENT,
               "each at least 1");
        EXPECT(vds_read(ds, 0, VDS_FLOAT32, NULL, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)back, sizeof back), VDS_ERR_NULL_POINTER,
               "start is NULL");
        EXPECT(vds_read(ds, 0, VDS_FLOAT32, start, shape, NULL, 3, VDS_ORDER_C, NULL, sizeof back), VDS_ERR_NULL_POINTER, "buf is NULL");
        EXPECT(vds_write(ds, 0, VDS_FLOAT32, start, shape, NULL, 3, VDS_ORDER_C, NULL, sizeof back), VDS_ERR_NULL_POINTER, "buf is NULL");
        EXPECT(vds_read(ds, 7, VDS_FLOAT32, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)back, sizeof back), VDS_ERR_OUT_OF_RANGE,
               "variable index 7");
        EXPECT(vds_read(ds, 0, VDS_FLOAT32, start, shape, NULL, 3, 5, (uint8_t *)back, sizeof back), VDS_ERR_INVALID_ARGUMENT,
               "5 is not a vds_order");
        EXPECT(vds_read(ds, 0, -3, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)back, sizeof back), VDS_ERR_INVALID_ARGUMENT,
               "-3 is not a vds_dtype");
    }
}

static void test_overflowing_lengths(void) {
    /* A variable of 2^40 x 2^40 one-byte elements: the region's element count overflows 64 bits. */
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    const char *axes[] = {"x", "y"};
    const uint64_t chunk[] = {1u << 14, 1u << 14};
    const uint64_t start[] = {0, 0}, huge[] = {(uint64_t)1 << 40, (uint64_t)1 << 40}, tall[] = {(uint64_t)1 << 40, 1};
    uint8_t one = 0;
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "x", (uint64_t)1 << 40, NULL, 0, 1));
    OK(vds_builder_add_axis(b, "y", (uint64_t)1 << 40, NULL, 0, 1));
    OK(vds_builder_add_variable(b, "v", VDS_UINT8, axes, 2, chunk));
    OK(vds_builder_set_overwrite(b, true));
    OK(vds_builder_create(b, path_in("huge.vds"), &ds));
    EXPECT(vds_read(ds, 0, VDS_UINT8, start, huge, NULL, 2, VDS_ORDER_C, &one, 1), VDS_ERR_OUT_OF_RANGE, "region element count overflows");
    EXPECT(vds_read(ds, 0, VDS_UINT8, start, tall, NULL, 2, VDS_ORDER_C, &one, 1), VDS_ERR_BUFFER_TOO_SMALL, "needs a buffer of 1099511627776 bytes");
    /* Lengths no object can have are refused before they become a slice. */
    EXPECT(vds_read(ds, 0, VDS_UINT8, start, tall, NULL, 2, VDS_ORDER_C, &one, SIZE_MAX), VDS_ERR_OUT_OF_RANGE, "exceeds the largest possible object");
    EXPECT(vds_write(ds, 0, VDS_UINT8, start, tall, NULL, 2, VDS_ORDER_C, &one, SIZE_MAX), VDS_ERR_OUT_OF_RANGE, "exceeds the largest possible object");
    OK(vds_close(ds));
    OK(vds_builder_free(b));
}

static void test_info(vds_dataset *ds) {
    size_t n = 0, needed = 0, index = 99;
    char name[64], tiny[3];
    vds_axis_info axis;
    vds_variable_info info;
    float fill = 0;
    int64_t ifill = 0;
    vds_stats stats;

    OK(vds_axis_count(ds, &n));
    CHECK(n == 3);
    OK(vds_get_axis_info(ds, 1, &axis));
    CHECK(axis.samples == NX && axis.first == 0.0 && axis.last == 275.0);
    OK(vds_axis_name(ds, 1, name, sizeof name, &needed));
    CHECK(strcmp(name, "crossline") == 0 && needed == 10);
    OK(vds_axis_unit(ds, 2, name, sizeof name, NULL));
    CHECK(strcmp(name, "ms") == 0);
    OK(vds_axis_unit(ds, 0, name, sizeof name, NULL));
    CHECK(strcmp(name, "") == 0);
    /* Size query, then a buffer that is too small: nothing is written. */
    needed = 0;
    OK(vds_axis_name(ds, 0, NULL, 0, &needed));
    CHECK(needed == 7);
    memcpy(tiny, "ab", 3);
    EXPECT(vds_axis_name(ds, 0, tiny, sizeof tiny, &needed), VDS_ERR_BUFFER_TOO_SMALL, "needs 7 bytes");
    CHECK(needed == 7 && strcmp(tiny, "ab") == 0);
    EXPECT(vds_axis_name(ds, 0, NULL, 5, &needed), VDS_ERR_NULL_POINTER, "buf is NULL");
    EXPECT(vds_axis_name(ds, 3, name, sizeof name, &needed), VDS_ERR_OUT_OF_RANGE, "axis index 3");
    EXPECT(vds_get_axis_info(ds, 0, NULL), VDS_ERR_NULL_POINTER, "out_info is NULL");
    EXPECT(vds_axis_count(ds, NULL), VDS_ERR_NULL_POINTER, "out_count is NULL");

    OK(vds_variable_count(ds, &n));
    CHECK(n == 3);
    OK(vds_variable_find(ds, "present", &index));
    CHECK(index == 1);
    EXPECT(vds_variable_find(ds, "absent", &index), VDS_ERR_NOT_FOUND, "no variable named \"absent\"");
    CHECK(index == 1); /* outputs are written only on success */
    OK(vds_get_variable_info(ds, 0, &info));
    CHECK(info.dtype == VDS_FLOAT32 && info.ndim == 3);
    CHECK(info.shape[0] == NI && info.shape[1] == NX && info.shape[2] == NT && info.shape[3] == 0);
    CHECK(info.chunk[0] == 8 && info.chunk[2] == 16);
    CHECK(info.axes[0] == 0 && info.axes[2] == 2);
    CHECK(info.compression == VDS_COMPRESSION_DEFLATE && info.level == 6 && info.shuffle);
    OK(vds_get_variable_info(ds, 1, &info));
    CHECK(info.dtype == VDS_BOOL && info.ndim == 2 && info.compression == VDS_COMPRESSION_ZSTD && info.level == 1);
    OK(vds_get_variable_info(ds, 2, &info));
    CHECK(info.dtype == VDS_INT64 && info.chunk[0] == NT); /* default chunk, capped by the axis */
    CHECK(info.compression == VDS_COMPRESSION_ZSTD && info.level == 3 && info.shuffle);
    EXPECT(vds_get_variable_info(ds, 3, &info), VDS_ERR_OUT_OF_RANGE, "variable index 3");
    OK(vds_variable_name(ds, 2, name, sizeof name, NULL));
    CHECK(strcmp(name, "count") == 0);
    OK(vds_variable_unit(ds, 0, name, sizeof name, NULL));
    CHECK(strcmp(name, "Pa") == 0);
    OK(vds_variable_fill(ds, 0, (uint8_t *)&fill, sizeof fill));
    CHECK(fill == -999.25f);
    OK(vds_variable_fill(ds, 2, (uint8_t *)&ifill, sizeof ifill));
    CHECK(ifill == -1);
    EXPECT(vds_variable_fill(ds, 0, (uint8_t *)&ifill, sizeof ifill), VDS_ERR_TYPE_MISMATCH, "value_len is 8");

    OK(vds_get_stats(ds, &stats));
    CHECK(stats.constant_chunks == 1); /* count is all 7 */
    CHECK(stats.stored_chunks >= 12 + 1 + 1 && stats.stored_bytes > 0 && stats.raw_bytes >= stats.stored_bytes);
    EXPECT(vds_get_stats(ds, NULL), VDS_ERR_NULL_POINTER, "out_stats is NULL");
}

static void test_attributes(vds_dataset *ds) {
    char buf[4096];
    size_t needed = 0;
    OK(vds_attributes_json(ds, NULL, buf, sizeof buf, &needed));
    CHECK(strcmp(buf, "{\"survey\":\"C test\"}") == 0 && needed == strlen(buf) + 1);
    OK(vds_attributes_json(ds, "amplitude", buf, sizeof buf, NULL));
    CHECK(strcmp(buf, "{\"scale\":{\"factor\":0.5}}") == 0);
    EXPECT(vds_attributes_json(ds, "nope", buf, sizeof buf, NULL), VDS_ERR_NOT_FOUND, "no variable named \"nope\"");
    OK(vds_set_attribute(ds, NULL, "processed", "[1, 2, 3]"));
    OK(vds_set_attribute(ds, NULL, "survey", NULL));
    OK(vds_set_attribute(ds, "present", "note", "\"mask\""));
    EXPECT(vds_set_attribute(ds, NULL, "bad", "[1,"), VDS_ERR_INVALID_ARGUMENT, "malformed JSON");
    EXPECT(vds_set_attribute(ds, NULL, NULL, "1"), VDS_ERR_NULL_POINTER, "key is NULL");
    OK(vds_attributes_json(ds, NULL, buf, sizeof buf, NULL));
    CHECK(strcmp(buf, "{\"processed\":[1,2,3]}") == 0);
    OK(vds_descriptor_json(ds, buf, sizeof buf, &needed));
    CHECK(strstr(buf, "\"format\":\"vds\"") != NULL && strstr(buf, "\"note\":\"mask\"") != NULL);
}

static void test_slots(vds_dataset *ds) {
    const uint16_t both[] = {0, 1}, missing[] = {5};
    const uint64_t start[] = {0, 0, 0}, shape[] = {NI, NX, NT};
    static float vol[NI * NX * NT];
    int k;
    long len = 0;
    unsigned char *data;
    for (k = 0; k < NI * NX * NT; k++) vol[k] = (float)k;
    OK(vds_set_slot_policy(ds, VDS_SLOTS_ROUND_ROBIN, both, 2, 0));
    OK(vds_write(ds, 0, VDS_FLOAT32, start, shape, NULL, 3, VDS_ORDER_C, (const uint8_t *)vol, sizeof vol));
    OK(vds_commit(ds));
    data = read_file(path_in("c_test.vds.1"), &len);
    CHECK(data != NULL && len > 1000); /* half the stored chunks went to the external file */
    free(data);
    OK(vds_set_slot_policy(ds, VDS_SLOTS_BY_SIZE, both, 2, 1 << 20));
    OK(vds_set_slot_policy(ds, VDS_SLOTS_FIXED, both, 1, 0));
    EXPECT(vds_set_slot_policy(ds, VDS_SLOTS_FIXED, missing, 1, 0), VDS_ERR_INVALID_ARGUMENT, "must name slots 0..=1");
    EXPECT(vds_set_slot_policy(ds, 9, both, 2, 0), VDS_ERR_INVALID_ARGUMENT, "9 is not a vds_slot_policy");
    EXPECT(vds_set_slot_policy(ds, VDS_SLOTS_FIXED, both, 0, 0), VDS_ERR_INVALID_ARGUMENT, "nslots is 0");
    EXPECT(vds_set_slot_policy(ds, VDS_SLOTS_FIXED, NULL, 1, 0), VDS_ERR_NULL_POINTER, "slots is NULL");
}

static void test_reopen_lock_and_handles(const char *path) {
    vds_dataset *r = NULL, *w = NULL, *w2 = NULL;
    vds_builder *b = NULL;
    const uint64_t start[] = {3, 4, 5}, one[] = {1, 1, 1};
    float v = 0;

    OK(vds_open(path, VDS_OPEN_READ, &r));
    OK(vds_read(r, 0, VDS_FLOAT32, start, one, NULL, 3, VDS_ORDER_C, (uint8_t *)&v, sizeof v));
    CHECK(v == (float)((3 * NX + 4) * NT + 5));
    EXPECT(vds_write(r, 0, VDS_FLOAT32, start, one, NULL, 3, VDS_ORDER_C, (const uint8_t *)&v, sizeof v), VDS_ERR_READ_ONLY, "open read-only");
    EXPECT(vds_set_attribute(r, NULL, "k", "1"), VDS_ERR_READ_ONLY, "read-only");
    EXPECT(vds_commit(r), VDS_ERR_READ_ONLY, "read-only");

    OK(vds_open(path, VDS_OPEN_WRITE | VDS_OPEN_NO_SYNC, &w));
    EXPECT(vds_open(path, VDS_OPEN_WRITE, &w2), VDS_ERR_LOCKED, "another writer has the file open");
    {
        /* Overwriting a file another writer holds is refused, and leaves it whole. */
        const char *x_axis[] = {"x"};
        OK(vds_builder_new(&b));
        OK(vds_builder_add_axis(b, "x", 4, NULL, 0, 3));
        OK(vds_builder_add_variable(b, "v", VDS_INT8, x_axis, 1, NULL));
        OK(vds_builder_set_overwrite(b, true));
        EXPECT(vds_builder_create(b, path, &w2), VDS_ERR_LOCKED, "another writer has the file open");
        OK(vds_builder_free(b));
    }
    /* Rollback: uncommitted writes and attributes are discarded, the handle stays open. */
    {
        float forty_two = 42.0f, got = 0;
        OK(vds_write(w, 0, VDS_FLOAT32, start, one, NULL, 3, VDS_ORDER_C, (const uint8_t *)&forty_two, sizeof forty_two));
        OK(vds_set_attribute(w, NULL, "temporary", "true"));
        OK(vds_rollback(w));
        OK(vds_read(w, 0, VDS_FLOAT32, start, one, NULL, 3, VDS_ORDER_C, (uint8_t *)&got, sizeof got));
        CHECK(got == v);
        {
            char attrs[256];
            OK(vds_attributes_json(w, NULL, attrs, sizeof attrs, NULL));
            CHECK(strstr(attrs, "temporary") == NULL);
        }
        OK(vds_rollback(r)); /* read-only: nothing to discard */
        EXPECT(vds_rollback(NULL), VDS_ERR_NULL_POINTER, "dataset handle is NULL");
    }
    CHECK(w2 == NULL);
    EXPECT(vds_open(path, 64, &w2), VDS_ERR_INVALID_ARGUMENT, "unknown open flags 0x40");
    EXPECT(vds_open(path_in("does-not-exist.vds"), VDS_OPEN_READ, &w2), VDS_ERR_NOT_FOUND, "does-not-exist.vds");
    EXPECT(vds_open(NULL, VDS_OPEN_READ, &w2), VDS_ERR_NULL_POINTER, "path is NULL");
    EXPECT(vds_open(path, VDS_OPEN_READ, NULL), VDS_ERR_NULL_POINTER, "out_dataset is NULL");

    /* Handles of the wrong kind. */
    OK(vds_builder_new(&b));
    EXPECT(vds_commit((vds_dataset *)b), VDS_ERR_BAD_HANDLE, "not a vds_dataset");
    EXPECT(vds_builder_add_axis((vds_builder *)w, "x", 1, NULL, 0, 0), VDS_ERR_BAD_HANDLE, "not a vds_builder");
    EXPECT(vds_close((vds_dataset *)b), VDS_ERR_BAD_HANDLE, "not a vds_dataset");
    OK(vds_builder_free(b));
    /* A pointer that was never a handle. */
    EXPECT(vds_commit((vds_dataset *)&v), VDS_ERR_BAD_HANDLE, "not a live handle");

    OK(vds_close(w));
    OK(vds_close(r));
    /* Closed handles. */
    EXPECT(vds_commit(w), VDS_ERR_BAD_HANDLE, "not a live handle");
    EXPECT(vds_read(r, 0, VDS_FLOAT32, start, one, NULL, 3, VDS_ORDER_C, (uint8_t *)&v, sizeof v), VDS_ERR_BAD_HANDLE, "not a live handle");
    EXPECT(vds_close(r), VDS_ERR_BAD_HANDLE, "not a live handle");
    OK(vds_close(NULL));
    EXPECT(vds_commit(NULL), VDS_ERR_NULL_POINTER, "dataset handle is NULL");
}

static void test_damaged_files(const char *path) {
    vds_dataset *ds = NULL;
    long body;
    unsigned char junk[64];

    /* A byte of the descriptor (line 2 starts at offset 8). */
    flip_copy(path, path_in("bad-descriptor.vds"), 20);
    EXPECT(vds_open(path_in("bad-descriptor.vds"), VDS_OPEN_READ, &ds), VDS_ERR_CORRUPT, "corrupt descriptor at offset 0x8: CRC32 mismatch");
    CHECK(ds == NULL);

    /* A byte of a live chunk: in a fresh file with one stored chunk, it starts the body.
     * Opening works; reading that chunk finds the damage. */
    {
        vds_builder *b = NULL;
        const char *axes[] = {"x"};
        const uint64_t s0[] = {0}, n[] = {64};
        double ramp[64];
        int k;
        for (k = 0; k < 64; k++) ramp[k] = k * 0.5;
        OK(vds_builder_new(&b));
        OK(vds_builder_add_axis(b, "x", 64, NULL, 0, 63));
        OK(vds_builder_add_variable(b, "ramp", VDS_FLOAT64, axes, 1, NULL));
        OK(vds_builder_set_overwrite(b, true));
        OK(vds_builder_create(b, path_in("one-chunk.vds"), &ds));
        OK(vds_write(ds, 0, VDS_FLOAT64, s0, n, NULL, 1, VDS_ORDER_C, (const uint8_t *)ramp, sizeof ramp));
        OK(vds_close(ds));
        /* Asked for, the aligned layout every format 1.x reader opens: a 4096-byte head, two 512-byte slots. */
        OK(vds_builder_set_layout(b, VDS_LAYOUT_ALIGNED));
        OK(vds_builder_create(b, path_in("aligned.vds"), &ds));
        OK(vds_close(ds));
        CHECK(body_offset(path_in("aligned.vds")) == 4096 + 1024);
        OK(vds_builder_free(b));
        body = body_offset(path_in("one-chunk.vds"));
        /* The compact layout: a head padded to 128 bytes, two 128-byte slots (SPEC.md 1.1). */
        CHECK(body > 0 && body < 1024);
        flip_copy(path_in("one-chunk.vds"), path_in("bad-chunk.vds"), body + 5);
        OK(vds_open(path_in("bad-chunk.vds"), VDS_OPEN_READ, &ds));
        EXPECT(vds_read(ds, 0, VDS_FLOAT64, s0, n, NULL, 1, VDS_ORDER_C, (uint8_t *)ramp, sizeof ramp), VDS_ERR_CORRUPT,
               "corrupt chunk [0] of variable \"ramp\" at offset");
        CHECK(strstr(vds_last_error_message(), "CRC32 mismatch") != NULL);
        OK(vds_close(ds));
    }

    /* An index page (the last page of a one-commit file is its root), and a truncated file. */
    {
        long len = 0;
        unsigned char *data = read_file(path_in("one-chunk.vds"), &len);
        const uint64_t s0[] = {0}, n[] = {64};
        double ramp[64];
        CHECK(data != NULL && len > 512);
        if (data) {
            flip_copy(path_in("one-chunk.vds"), path_in("bad-page.vds"), len - 100);
            OK(vds_open(path_in("bad-page.vds"), VDS_OPEN_READ, &ds));
            EXPECT(vds_read(ds, 0, VDS_FLOAT64, s0, n, NULL, 1, VDS_ORDER_C, (uint8_t *)ramp, sizeof ramp), VDS_ERR_CORRUPT,
                   "corrupt index page at offset");
            OK(vds_close(ds));
            write_file(path_in("truncated.vds"), data, len - 10);
            EXPECT(vds_open(path_in("truncated.vds"), VDS_OPEN_READ, &ds), VDS_ERR_CORRUPT, "it was truncated");
            free(data);
        }
    }
    /* An external file that is a symbolic link leaving the directory: refused unless allowed.
     * And a memory limit below one chunk. */
    {
        vds_builder *b = NULL;
        const char *axes[] = {"x"};
        const uint64_t s0[] = {0}, n[] = {64}, chunk[] = {64};
        const uint16_t ext[] = {1};
        int32_t vals[64], back[64];
        int k;
        char outside[1300], slot[1300];
        for (k = 0; k < 64; k++) vals[k] = k * 3;
        OK(vds_builder_new(&b));
        OK(vds_builder_add_axis(b, "x", 64, NULL, 0, 63));
        OK(vds_builder_add_variable(b, "v", VDS_INT32, axes, 1, chunk));
        OK(vds_builder_add_external_slot(b, "linked.1"));
        OK(vds_builder_set_overwrite(b, true));
        OK(vds_builder_create(b, path_in("linked.vds"), &ds));
        OK(vds_set_slot_policy(ds, VDS_SLOTS_FIXED, ext, 1, 0));
        OK(vds_write(ds, 0, VDS_INT32, s0, n, NULL, 1, VDS_ORDER_C, (const uint8_t *)vals, sizeof vals));
        OK(vds_close(ds));
        OK(vds_builder_free(b));
        snprintf(slot, sizeof slot, "%s", path_in("linked.1"));
        snprintf(outside, sizeof outside, "%s.outside", dir);
        CHECK(rename(slot, outside) == 0);
        CHECK(symlink(outside, slot) == 0);
        OK(vds_open(path_in("linked.vds"), VDS_OPEN_READ, &ds));
        EXPECT(vds_read(ds, 0, VDS_INT32, s0, n, NULL, 1, VDS_ORDER_C, (uint8_t *)back, sizeof back), VDS_ERR_CORRUPT,
               "outside the container's directory");
        OK(vds_close(ds));
        OK(vds_open(path_in("linked.vds"), VDS_OPEN_READ | VDS_OPEN_ALLOW_EXTERNAL_PATHS, &ds));
        OK(vds_set_memory_limit(ds, 100)); /* below one chunk (256 bytes) */
        {
            /* Part of the chunk: it must be decoded into a buffer, which the limit refuses.
             * (A read of the whole uncompressed chunk goes straight into the caller's buffer.) */
            const uint64_t s1[] = {1}, n10[] = {10};
            EXPECT(vds_read(ds, 0, VDS_INT32, s1, n10, NULL, 1, VDS_ORDER_C, (uint8_t *)back, 10 * sizeof back[0]), VDS_ERR_OUT_OF_MEMORY,
                   "more than the memory limit of 100 bytes");
        }
        OK(vds_set_memory_limit(ds, 1 << 20));
        OK(vds_read(ds, 0, VDS_INT32, s0, n, NULL, 1, VDS_ORDER_C, (uint8_t *)back, sizeof back));
        CHECK(memcmp(vals, back, sizeof vals) == 0);
        EXPECT(vds_set_memory_limit(NULL, 100), VDS_ERR_NULL_POINTER, "dataset handle is NULL");
        OK(vds_close(ds));
        remove(outside);
    }

    /* Not a container at all, and a newer major version. */
    memset(junk, 'x', sizeof junk);
    junk[10] = '\n';
    write_file(path_in("junk.vds"), junk, sizeof junk);
    EXPECT(vds_open(path_in("junk.vds"), VDS_OPEN_READ, &ds), VDS_ERR_CORRUPT, "not a libvds container");
    flip_copy(path, path_in("v5.vds"), 4); /* '1' ^ 4 = '5' */
    EXPECT(vds_open(path_in("v5.vds"), VDS_OPEN_READ, &ds), VDS_ERR_UNSUPPORTED_VERSION, "file format version 5.");
}

/* A failing call from a thread-specific-data destructor, when the thread's
 * other thread-locals may already be gone: it must return an error, not abort. */
static pthread_key_t teardown_key;
static vds_status teardown_status = VDS_OK;
static void call_during_teardown(void *unused) {
    (void)unused;
    teardown_status = vds_builder_free((vds_builder *)(uintptr_t)0x10);
}
static void *teardown_thread(void *unused) {
    (void)unused;
    vds_builder_free((vds_builder *)(uintptr_t)0x10); /* sets this thread's last error */
    pthread_setspecific(teardown_key, &teardown_key);
    return NULL;
}
static void test_calls_during_thread_teardown(void) {
    pthread_t t;
    CHECK(pthread_key_create(&teardown_key, call_during_teardown) == 0);
    CHECK(pthread_create(&t, NULL, teardown_thread, NULL) == 0);
    CHECK(pthread_join(t, NULL) == 0);
    CHECK(teardown_status == VDS_ERR_BAD_HANDLE);
    pthread_key_delete(teardown_key);
}

int main(int argc, char **argv) {
    vds_dataset *ds;
    char path[1200];
    if (argc != 2) {
        fprintf(stderr, "usage: %s SCRATCH_DIR\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    snprintf(path, sizeof path, "%s", path_in("c_test.vds"));

    test_version_and_status();
    test_calls_during_thread_teardown();
    ds = create_dataset(path);
    if (ds) {
        test_write_and_read(ds);
        test_info(ds);
        test_attributes(ds);
        test_slots(ds);
        OK(vds_close(ds));
    }
    test_overflowing_lengths();
    test_reopen_lock_and_handles(path);
    test_damaged_files(path);
    test_layers();
    test_blocks();
    test_quantization();
    test_bounded();
    test_mask();
    test_margins();
    test_growth();
    test_fragments();
    test_write_back();

    if (failures) {
        fprintf(stderr, "vds C test: %d of %d checks failed\n", failures, checks);
        return 1;
    }
    printf("vds C test: all %d checks passed\n", checks);
    return 0;
}
