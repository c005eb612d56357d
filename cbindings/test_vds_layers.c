/*
 * The C test of libvds, continued (test_vds.c has main): levels of detail
 * and 2-D tiles, blocks, quantization, missing-value masks, margins,
 * growable axes, fragments, writing back and the bounded codec, each
 * checked against values computed here.
 */
#define _POSIX_C_SOURCE 200809L
#include "test_vds.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* A builder of a 16 x 12 x 10 float volume "amp" in chunks of `brick`. */
static vds_builder *volume_builder(const uint64_t brick[3]) {
    vds_builder *b = NULL;
    const char *axes[3] = {"inline", "crossline", "time"};
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "inline", 16, NULL, 0.0, 15.0));
    OK(vds_builder_add_axis(b, "crossline", 12, NULL, 0.0, 11.0));
    OK(vds_builder_add_axis(b, "time", 10, "ms", 0.0, 36.0));
    OK(vds_builder_add_variable(b, "amp", VDS_FLOAT32, axes, 3, brick));
    OK(vds_builder_set_overwrite(b, true));
    return b;
}

/* The volume of volume_builder in 4^3 bricks. */
static vds_builder *layers_builder(void) {
    uint64_t brick[3] = {4, 4, 4};
    return volume_builder(brick);
}

/* Levels of detail and 2-D tiles: the volume of layers_builder plus tiles
 * across the last two axes, 3 levels over every axis. */
void test_layers(void) {
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    const char *some[2] = {"crossline", "nope"};
    uint64_t tile[3] = {1, 12, 10}, bad_tile[3] = {0, 12, 10};
    uint64_t start[3] = {0, 0, 0}, shape[3] = {16, 12, 10}, plane[2] = {0, 0};
    size_t fixed_axes[1] = {0}, twice[2] = {0, 0};
    uint64_t fixed_index[1] = {5}, twice_index[2] = {1, 2};
    static float data[16 * 12 * 10], got[16 * 12 * 10], tiles[12 * 10], bricks[12 * 10], level1[8 * 6 * 5];
    uint64_t before = 0, after_tiles = 0, after_bricks = 0;
    vds_layer_info info;
    char name[64];
    size_t needed = 0;
    int i, ok_all = 1;
    for (i = 0; i < 16 * 12 * 10; i++) data[i] = (float)(i % 97) * 0.5f - 20.0f;

    b = layers_builder();
    EXPECT(vds_builder_set_lods(b, "amp", 3, NULL, 0, 7), VDS_ERR_INVALID_ARGUMENT, "not a vds_lod_method");
    EXPECT(vds_builder_set_lods(b, "nope", 3, NULL, 0, VDS_LOD_AVERAGE), VDS_ERR_NOT_FOUND, "no variable named");
    EXPECT(vds_builder_add_partitioning(b, "amp", NULL, 3), VDS_ERR_NULL_POINTER, "chunk");
    EXPECT(vds_builder_add_partitioning(b, "amp", tile, 0), VDS_ERR_INVALID_ARGUMENT, "ndim is 0");
    /* Unknown lod axis and a zero extent are refused at create. */
    OK(vds_builder_set_lods(b, "amp", 3, some, 2, VDS_LOD_AVERAGE));
    EXPECT(vds_builder_create(b, path_in("layers.vds"), &ds), VDS_ERR_INVALID_ARGUMENT, "\"nope\" is not one of its axes");
    OK(vds_builder_set_lods(b, "amp", 3, NULL, 0, VDS_LOD_AVERAGE));
    OK(vds_builder_add_partitioning(b, "amp", bad_tile, 3));
    EXPECT(vds_builder_create(b, path_in("layers.vds"), &ds), VDS_ERR_INVALID_ARGUMENT, "partitioning");
    OK(vds_builder_free(b));
    b = layers_builder();
    OK(vds_builder_set_lods(b, "amp", 3, NULL, 0, VDS_LOD_AVERAGE));
    OK(vds_builder_add_partitioning(b, "amp", tile, 3));
    OK(vds_builder_create(b, path_in("layers.vds"), &ds));
    OK(vds_builder_free(b));
    if (!ds) return;
    OK(vds_write(ds, 0, VDS_FLOAT32, start, shape, NULL, 3, VDS_ORDER_C, (const uint8_t *)data, sizeof data));
    OK(vds_update_layers(ds));
    OK(vds_close(ds));

    OK(vds_open(path_in("layers.vds"), VDS_OPEN_READ, &ds));
    OK(vds_get_layer_info(ds, 0, 1, 1, &info));
    CHECK(info.levels == 3 && info.partitionings == 2 && info.ndim == 3);
    CHECK(info.shape[0] == 8 && info.shape[1] == 6 && info.shape[2] == 5);
    CHECK(info.chunk[0] == 1 && info.chunk[1] == 12 && info.chunk[2] == 10);
    CHECK(info.halved[0] && info.halved[1] && info.halved[2]);
    EXPECT(vds_get_layer_info(ds, 0, 3, 0, &info), VDS_ERR_OUT_OF_RANGE, "level(s) of detail");
    EXPECT(vds_get_layer_info(ds, 0, 0, 2, &info), VDS_ERR_OUT_OF_RANGE, "partitioning(s)");
    EXPECT(vds_get_layer_info(ds, 0, 0, 0, NULL), VDS_ERR_NULL_POINTER, "out_info");
    OK(vds_layer_name(ds, 0, 2, 1, name, sizeof name, &needed));
    CHECK(strcmp(name, "Dimensions_01LOD2") == 0 && needed == strlen("Dimensions_01LOD2") + 1);
    EXPECT(vds_layer_name(ds, 0, 0, 0, name, 3, &needed), VDS_ERR_BUFFER_TOO_SMALL, "");

    /* Level 0 from either partitioning equals the data. */
    OK(vds_read_lod(ds, 0, VDS_FLOAT32, 0, 1, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)got, sizeof got));
    for (i = 0; i < 16 * 12 * 10; i++) ok_all &= got[i] == data[i];
    CHECK(ok_all);
    /* Level 1, sample (0, 0, 0): the mean of the 2 x 2 x 2 block, pair by pair. */
    shape[0] = 8; shape[1] = 6; shape[2] = 5;
    OK(vds_read_lod(ds, 0, VDS_FLOAT32, 1, -1, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)level1, sizeof level1));
    {
        float a00 = (float)(((double)data[0] + (double)data[120]) / 2.0), a01 = (float)(((double)data[1] + (double)data[121]) / 2.0);
        float a10 = (float)(((double)data[10] + (double)data[130]) / 2.0), a11 = (float)(((double)data[11] + (double)data[131]) / 2.0);
        float b0 = (float)(((double)a00 + (double)a10) / 2.0), b1 = (float)(((double)a01 + (double)a11) / 2.0);
        CHECK(level1[0] == (float)(((double)b0 + (double)b1) / 2.0));
    }
    EXPECT(vds_read_lod(ds, 0, VDS_FLOAT32, 3, -1, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)level1, sizeof level1), VDS_ERR_OUT_OF_RANGE, "level 3 does not exist");
    EXPECT(vds_read_lod(ds, 0, VDS_FLOAT32, 1, 2, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)level1, sizeof level1), VDS_ERR_OUT_OF_RANGE, "2 does not exist");
    EXPECT(vds_read_lod(ds, 0, VDS_FLOAT32, 1, 300, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)level1, sizeof level1), VDS_ERR_OUT_OF_RANGE, "300 does not exist");
    EXPECT(vds_read_lod(ds, 0, VDS_INT8, 1, -1, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)level1, sizeof level1), VDS_ERR_TYPE_MISMATCH, "holds float32");
    EXPECT(vds_read_lod(ds, 0, VDS_FLOAT32, 1, -1, start, shape, NULL, 3, VDS_ORDER_C, NULL, sizeof level1), VDS_ERR_NULL_POINTER, "buf");

    /* An inline slice from tiles equals the same plane from bricks, and reads a tenth of the bytes. */
    OK(vds_stored_bytes_read(ds, &before));
    OK(vds_read_slice(ds, 0, VDS_FLOAT32, 0, fixed_axes, fixed_index, 1, VDS_ORDER_C, (uint8_t *)tiles, sizeof tiles, plane));
    OK(vds_stored_bytes_read(ds, &after_tiles));
    CHECK(plane[0] == 12 && plane[1] == 10);
    start[0] = 5; shape[0] = 1; shape[1] = 12; shape[2] = 10;
    OK(vds_read_lod(ds, 0, VDS_FLOAT32, 0, 0, start, shape, NULL, 3, VDS_ORDER_C, (uint8_t *)bricks, sizeof bricks));
    OK(vds_stored_bytes_read(ds, &after_bricks));
    CHECK(memcmp(tiles, bricks, sizeof tiles) == 0);
    CHECK(tiles[13] == data[5 * 120 + 13]);
    CHECK(after_tiles - before == sizeof tiles);
    CHECK(after_bricks - after_tiles >= 4 * (after_tiles - before));
    EXPECT(vds_read_slice(ds, 0, VDS_FLOAT32, 0, twice, twice_index, 2, VDS_ORDER_C, (uint8_t *)tiles, sizeof tiles, plane), VDS_ERR_INVALID_ARGUMENT, "fixed twice");
    EXPECT(vds_read_slice(ds, 0, VDS_FLOAT32, 0, NULL, NULL, 0, VDS_ORDER_C, (uint8_t *)tiles, sizeof tiles, plane), VDS_ERR_INVALID_ARGUMENT, "leaves 3 of 3");
    EXPECT(vds_read_slice(ds, 0, VDS_FLOAT32, 0, fixed_axes, fixed_index, 1, VDS_ORDER_C, (uint8_t *)tiles, sizeof tiles, NULL), VDS_ERR_NULL_POINTER, "out_shape");
    EXPECT(vds_read_slice(ds, 0, VDS_FLOAT32, 0, fixed_axes, fixed_index, 1, VDS_ORDER_C, (uint8_t *)tiles, 8, plane), VDS_ERR_BUFFER_TOO_SMALL, "buffer");
    EXPECT(vds_update_layers(ds), VDS_ERR_READ_ONLY, "read-only");
    EXPECT(vds_stored_bytes_read(ds, NULL), VDS_ERR_NULL_POINTER, "out_bytes");
    OK(vds_close(ds));
    EXPECT(vds_stored_bytes_read(ds, &before), VDS_ERR_BAD_HANDLE, "");
}

/* Quantized storage and a no-value marker. */
/* Chunks made of blocks: a trace through 8 x 4 x 10 blocks of one
 * 16 x 12 x 10 chunk reads the same values as the data, and fewer stored
 * bytes than the chunk. */
void test_blocks(void) {
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    uint64_t block[3] = {8, 4, 10}, bad[3] = {8, 0, 10}, brick[3] = {16, 12, 10};
    uint64_t start[3] = {0, 0, 0}, shape[3] = {16, 12, 10}, trace_start[3] = {9, 7, 0}, trace_shape[3] = {1, 1, 10};
    uint64_t before = 0, after = 0;
    static float data[16 * 12 * 10], trace[10];
    int i, ok_all = 1;
    for (i = 0; i < 16 * 12 * 10; i++) data[i] = (float)((i * 37) % 101) - 50.0f;

    b = volume_builder(brick);
    EXPECT(vds_builder_set_blocks(b, "amp", NULL, 3), VDS_ERR_NULL_POINTER, "block");
    EXPECT(vds_builder_set_blocks(b, "nope", block, 3), VDS_ERR_NOT_FOUND, "no variable named");
    OK(vds_builder_set_blocks(b, "amp", bad, 3));
    EXPECT(vds_builder_create(b, path_in("blocks.vds"), &ds), VDS_ERR_INVALID_ARGUMENT, "1 to its chunk extent");
    OK(vds_builder_set_blocks(b, "amp", block, 3));
    OK(vds_builder_create(b, path_in("blocks.vds"), &ds));
    OK(vds_builder_free(b));
    if (!ds) return;
    OK(vds_write(ds, 0, VDS_FLOAT32, start, shape, NULL, 3, VDS_ORDER_C, (const uint8_t *)data, sizeof data));
    OK(vds_close(ds));

    OK(vds_open(path_in("blocks.vds"), VDS_OPEN_READ, &ds));
    OK(vds_stored_bytes_read(ds, &before));
    OK(vds_read(ds, 0, VDS_FLOAT32, trace_start, trace_shape, NULL, 3, VDS_ORDER_C, (uint8_t *)trace, sizeof trace));
    OK(vds_stored_bytes_read(ds, &after));
    for (i = 0; i < 10; i++) ok_all &= trace[i] == data[9 * 120 + 7 * 10 + i];
    CHECK(ok_all);
    /* One of the chunk's six blocks and its table, not the whole chunk. */
    CHECK(after - before < 16 * 12 * 10 * sizeof(float) / 2);
    OK(vds_close(ds));
}

void test_quantization(void) {
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    const char *axes[1] = {"x"};
    uint64_t start[1] = {0}, shape[1] = {100};
    float values[100], back[100];
    uint8_t raw[100];
    int16_t nv = -1, counts[100], counts_back[100];
    int32_t wrong = 0;
    double step = 2.0 / 255.0;
    int i, ok_all = 1;
    for (i = 0; i < 100; i++) {
        values[i] = (float)(i - 50) * 0.023f;
        counts[i] = (int16_t)(i < 50 ? -1 : i);
    }
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "x", 100, NULL, 0.0, 99.0));
    OK(vds_builder_add_variable(b, "q", VDS_FLOAT32, axes, 1, NULL));
    OK(vds_builder_add_variable(b, "n", VDS_INT16, axes, 1, NULL));
    OK(vds_builder_set_overwrite(b, true));
    EXPECT(vds_builder_set_quantization(b, "q", 99, -1.0, 1.0), VDS_ERR_INVALID_ARGUMENT, "not a vds_dtype");
    EXPECT(vds_builder_set_quantization(b, "nope", VDS_UINT8, -1.0, 1.0), VDS_ERR_NOT_FOUND, "no variable named");
    EXPECT(vds_builder_set_no_value(b, "n", (const uint8_t *)&wrong, sizeof wrong), VDS_ERR_TYPE_MISMATCH, "holds int16");
    OK(vds_builder_set_quantization(b, "n", VDS_UINT8, -1.0, 1.0));
    EXPECT(vds_builder_create(b, path_in("quant.vds"), &ds), VDS_ERR_INVALID_ARGUMENT, "quantization needs a float variable");
    OK(vds_builder_free(b));
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "x", 100, NULL, 0.0, 99.0));
    OK(vds_builder_add_variable(b, "q", VDS_FLOAT32, axes, 1, NULL));
    OK(vds_builder_add_variable(b, "n", VDS_INT16, axes, 1, NULL));
    OK(vds_builder_set_overwrite(b, true));
    OK(vds_builder_set_quantization(b, "q", VDS_UINT8, -1.0, 1.0));
    OK(vds_builder_set_no_value(b, "n", (const uint8_t *)&nv, sizeof nv));
    OK(vds_builder_create(b, path_in("quant.vds"), &ds));
    OK(vds_builder_free(b));
    if (!ds) return;
    OK(vds_write(ds, 0, VDS_FLOAT32, start, shape, NULL, 1, VDS_ORDER_C, (const uint8_t *)values, sizeof values));
    shape[0] = 50;
    OK(vds_write(ds, 1, VDS_INT16, start, shape, NULL, 1, VDS_ORDER_C, (const uint8_t *)counts, 50 * sizeof(int16_t)));
    shape[0] = 100;
    OK(vds_close(ds));
    OK(vds_open(path_in("quant.vds"), VDS_OPEN_READ, &ds));
    OK(vds_read(ds, 0, VDS_FLOAT32, start, shape, NULL, 1, VDS_ORDER_C, (uint8_t *)back, sizeof back));
    OK(vds_read(ds, 0, VDS_UINT8, start, shape, NULL, 1, VDS_ORDER_C, raw, sizeof raw));
    for (i = 0; i < 100; i++) {
        double x = values[i] < -1.0f ? -1.0 : values[i] > 1.0f ? 1.0 : values[i];
        double k = (double)(long)((x + 1.0) / step + 0.5), d = (double)back[i] - x;
        ok_all &= (d < 0 ? -d : d) <= step / 2.0 + 1e-6;
        ok_all &= raw[i] == (uint8_t)k;
    }
    CHECK(ok_all);
    EXPECT(vds_read(ds, 0, VDS_INT16, start, shape, NULL, 1, VDS_ORDER_C, raw, sizeof raw), VDS_ERR_TYPE_MISMATCH, "holds float32");
    /* The unwritten half of "n" reads as its no-value, which is its fill. */
    OK(vds_read(ds, 1, VDS_INT16, start, shape, NULL, 1, VDS_ORDER_C, (uint8_t *)counts_back, sizeof counts_back));
    CHECK(counts_back[0] == -1 && counts_back[99] == -1);
    OK(vds_close(ds));
}

/* A missing-value bitmask beside the values. */
void test_mask(void) {
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    const char *axes[1] = {"x"};
    uint64_t start[1] = {0}, shape[1] = {20};
    int32_t values[20], back[20];
    uint8_t missing[20], mask[20];
    int i, ok_all = 1;
    for (i = 0; i < 20; i++) {
        values[i] = i * 3;
        missing[i] = (uint8_t)(i % 4 == 1);
    }
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "x", 20, NULL, 0.0, 19.0));
    OK(vds_builder_add_variable(b, "v", VDS_INT32, axes, 1, NULL));
    OK(vds_builder_add_variable(b, "plain", VDS_INT32, axes, 1, NULL));
    OK(vds_builder_set_overwrite(b, true));
    EXPECT(vds_builder_set_missing_mask(b, "nope", true), VDS_ERR_NOT_FOUND, "no variable named");
    OK(vds_builder_set_missing_mask(b, "v", true));
    OK(vds_builder_create(b, path_in("mask.vds"), &ds));
    OK(vds_builder_free(b));
    if (!ds) return;
    EXPECT(vds_write_masked(ds, 0, VDS_INT32, start, shape, NULL, 1, VDS_ORDER_C, (const uint8_t *)values, sizeof values, missing, 10),
           VDS_ERR_BUFFER_TOO_SMALL, "buffer");
    EXPECT(vds_write_masked(ds, 1, VDS_INT32, start, shape, NULL, 1, VDS_ORDER_C, (const uint8_t *)values, sizeof values, missing, 20),
           VDS_ERR_INVALID_ARGUMENT, "keeps no missing-value mask");
    OK(vds_write_masked(ds, 0, VDS_INT32, start, shape, NULL, 1, VDS_ORDER_C, (const uint8_t *)values, sizeof values, missing, sizeof missing));
    OK(vds_close(ds));
    OK(vds_open(path_in("mask.vds"), VDS_OPEN_READ, &ds));
    OK(vds_read(ds, 0, VDS_INT32, start, shape, NULL, 1, VDS_ORDER_C, (uint8_t *)back, sizeof back));
    OK(vds_read_mask(ds, 0, 0, start, shape, NULL, 1, VDS_ORDER_C, mask, sizeof mask));
    for (i = 0; i < 20; i++) ok_all &= back[i] == values[i] && mask[i] == missing[i];
    CHECK(ok_all);
    EXPECT(vds_read_mask(ds, 0, 0, start, shape, NULL, 1, VDS_ORDER_C, mask, 5), VDS_ERR_BUFFER_TOO_SMALL, "needs a buffer of 20");
    EXPECT(vds_read_mask(ds, 1, 0, start, shape, NULL, 1, VDS_ORDER_C, mask, sizeof mask), VDS_ERR_INVALID_ARGUMENT, "keeps no missing-value mask");
    EXPECT(vds_read_mask(ds, 0, 0, start, shape, NULL, 1, VDS_ORDER_C, NULL, sizeof mask), VDS_ERR_NULL_POINTER, "buf");
    OK(vds_close(ds));
}

/* Bricks with margins: brick 1 of a 1-D variable in chunks of 4 with margins
 * 2 and 1 holds samples 2..9. */
void test_margins(void) {
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    const char *axes[1] = {"x"};
    uint64_t chunk[1] = {4}, start[1] = {0}, shape[1] = {10}, coords[1] = {1}, outside[1] = {3}, bshape[1] = {0};
    int16_t values[10], brick[7], first[7];
    int i, ok_all = 1;
    for (i = 0; i < 10; i++) values[i] = (int16_t)(100 + i);
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "x", 10, NULL, 0.0, 9.0));
    OK(vds_builder_add_variable(b, "v", VDS_INT16, axes, 1, chunk));
    OK(vds_builder_set_overwrite(b, true));
    EXPECT(vds_builder_set_margin(b, "nope", 2, 1), VDS_ERR_NOT_FOUND, "no variable named");
    OK(vds_builder_set_margin(b, "v", 2, 1));
    OK(vds_builder_create(b, path_in("margins.vds"), &ds));
    OK(vds_builder_free(b));
    if (!ds) return;
    OK(vds_write(ds, 0, VDS_INT16, start, shape, NULL, 1, VDS_ORDER_C, (const uint8_t *)values, sizeof values));
    OK(vds_close(ds));
    OK(vds_open(path_in("margins.vds"), VDS_OPEN_READ, &ds));
    OK(vds_read_brick(ds, 0, VDS_INT16, 0, coords, 1, (uint8_t *)brick, sizeof brick, bshape));
    CHECK(bshape[0] == 7);
    for (i = 0; i < 7; i++) ok_all &= brick[i] == values[2 + i];
    CHECK(ok_all);
    /* Brick 0 starts 2 samples before the variable: those read as the fill value 0. */
    coords[0] = 0;
    OK(vds_read_brick(ds, 0, VDS_INT16, 0, coords, 1, (uint8_t *)first, sizeof first, bshape));
    CHECK(first[0] == 0 && first[1] == 0 && first[2] == 100 && first[6] == 104);
    EXPECT(vds_read_brick(ds, 0, VDS_INT16, 0, outside, 1, (uint8_t *)brick, sizeof brick, bshape), VDS_ERR_OUT_OF_RANGE, "outside the grid");
    EXPECT(vds_read_brick(ds, 0, VDS_INT16, 0, coords, 1, (uint8_t *)brick, 4, bshape), VDS_ERR_BUFFER_TOO_SMALL, "needs a buffer of 14");
    EXPECT(vds_read_brick(ds, 0, VDS_INT16, 0, coords, 1, (uint8_t *)brick, sizeof brick, NULL), VDS_ERR_NULL_POINTER, "out_shape");
    OK(vds_close(ds));
}

/* Growable axes: a time series grown by appends, then shrunk. */
void test_growth(void) {
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    const char *axes[2] = {"t", "s"};
    uint64_t chunk[2] = {4, 3}, start[2] = {0, 0}, shape[2] = {1, 3}, at = 99, max = 0;
    uint16_t slot = 0;
    int32_t row[3] = {1, 2, 3}, more[6] = {4, 5, 6, 7, 8, 9}, back[21], odd[4] = {0};
    vds_axis_info info;
    int growable = -1, i, ok_all = 1;
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "t", 1, "s", 0.0, 0.0));
    OK(vds_builder_add_axis(b, "s", 3, NULL, 0.0, 2.0));
    OK(vds_builder_add_variable(b, "v", VDS_INT32, axes, 2, chunk));
    OK(vds_builder_set_fill(b, "v", (const uint8_t *)&row[0], sizeof row[0]));
    OK(vds_builder_set_overwrite(b, true));
    EXPECT(vds_builder_set_axis_growable(b, "nope", 0), VDS_ERR_NOT_FOUND, "no axis named");
    EXPECT(vds_builder_set_axis_growable(b, NULL, 0), VDS_ERR_NULL_POINTER, "name");
    OK(vds_builder_set_axis_growable(b, "t", 7));
    OK(vds_builder_create(b, path_in("growth.vds"), &ds));
    OK(vds_builder_free(b));
    if (!ds) return;
    OK(vds_axis_growth(ds, 0, &growable, &max));
    CHECK(growable == 1 && max == 7);
    OK(vds_axis_growth(ds, 1, &growable, NULL));
    CHECK(growable == 0);
    EXPECT(vds_axis_growth(ds, 2, &growable, &max), VDS_ERR_OUT_OF_RANGE, "axis 2 does not exist");
    OK(vds_write(ds, 0, VDS_INT32, start, shape, NULL, 2, VDS_ORDER_C, (const uint8_t *)row, sizeof row));
    OK(vds_append(ds, 0, VDS_INT32, "t", VDS_ORDER_C, (const uint8_t *)more, sizeof more, &at));
    CHECK(at == 1);
    EXPECT(vds_append(ds, 0, VDS_INT32, "t", VDS_ORDER_C, (const uint8_t *)odd, sizeof odd, NULL), VDS_ERR_INVALID_ARGUMENT,
           "not a whole number of samples");
    EXPECT(vds_append(ds, 0, VDS_INT16, "t", VDS_ORDER_C, (const uint8_t *)more, sizeof more, NULL), VDS_ERR_TYPE_MISMATCH, "holds int32");
    EXPECT(vds_resize_axis(ds, "s", 5), VDS_ERR_INVALID_ARGUMENT, "not growable");
    EXPECT(vds_resize_axis(ds, "t", 8), VDS_ERR_OUT_OF_RANGE, "may grow to 7 samples");
    EXPECT(vds_resize_axis(ds, "nope", 2), VDS_ERR_NOT_FOUND, "no axis named");
    OK(vds_resize_axis(ds, "t", 7));
    OK(vds_commit(ds));
    OK(vds_get_axis_info(ds, 0, &info));
    CHECK(info.samples == 7 && info.last == 6.0);
    shape[0] = 7;
    OK(vds_read(ds, 0, VDS_INT32, start, shape, NULL, 2, VDS_ORDER_C, (uint8_t *)back, sizeof back));
    for (i = 0; i < 9; i++) ok_all &= back[i] == i + 1;
    for (i = 9; i < 21; i++) ok_all &= back[i] == 1; /* the fill value */
    CHECK(ok_all);
    OK(vds_resize_axis(ds, "t", 2));
    /* Appended rows go to a slot added now. */
    OK(vds_add_external_slot(ds, "growth.vdx", &slot));
    CHECK(slot == 1);
    EXPECT(vds_add_external_slot(ds, "growth.vdx", NULL), VDS_ERR_INVALID_ARGUMENT, "already used");
    EXPECT(vds_add_external_slot(ds, "../x.vdx", NULL), VDS_ERR_INVALID_ARGUMENT, "..");
    OK(vds_set_slot_policy(ds, VDS_SLOTS_BY_VARIABLE, &slot, 1, 0));
    OK(vds_append(ds, 0, VDS_INT32, "t", VDS_ORDER_C, (const uint8_t *)more, sizeof more, &at));
    CHECK(at == 2);
    OK(vds_close(ds));
    OK(vds_open(path_in("growth.vds"), VDS_OPEN_READ, &ds));
    OK(vds_get_axis_info(ds, 0, &info));
    CHECK(info.samples == 4);
    shape[0] = 4;
    OK(vds_read(ds, 0, VDS_INT32, start, shape, NULL, 2, VDS_ORDER_C, (uint8_t *)back, 12 * sizeof back[0]));
    for (i = 0; i < 6; i++) ok_all &= back[i] == i + 1 && back[6 + i] == more[i];
    CHECK(ok_all);
    EXPECT(vds_resize_axis(ds, "t", 3), VDS_ERR_READ_ONLY, "read-only");
    OK(vds_close(ds));
}

/* Fragments: two writers each seal their half, one merge adopts both. */
void test_fragments(void) {
    vds_builder *b = NULL;
    vds_dataset *ds = NULL, *f = NULL;
    const char *axes[1] = {"x"};
    const char *names[3] = {"f0.frag", "f1.frag", "never.frag"};
    uint64_t chunk[1] = {4}, start[1] = {0}, shape[1] = {4};
    int32_t half[4], back[8];
    size_t merged = 9, skipped = 9;
    int i, w, ok_all = 1;
    FILE *unsealed;
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "x", 8, NULL, 0.0, 7.0));
    OK(vds_builder_add_variable(b, "v", VDS_INT32, axes, 1, chunk));
    OK(vds_builder_set_overwrite(b, true));
    OK(vds_builder_create(b, path_in("frag.vds"), &ds));
    OK(vds_builder_free(b));
    OK(vds_close(ds));
    for (w = 0; w < 2; w++) {
        OK(vds_fragment_create(path_in("frag.vds"), names[w], &f));
        for (i = 0; i < 4; i++) half[i] = w * 100 + i;
        start[0] = (uint64_t)(4 * w);
        OK(vds_write(f, 0, VDS_INT32, start, shape, NULL, 1, VDS_ORDER_C, (const uint8_t *)half, sizeof half));
        EXPECT(vds_set_attribute(f, NULL, "k", "1"), VDS_ERR_INVALID_ARGUMENT, "fragment carries data only");
        OK(vds_close(f));
    }
    EXPECT(vds_fragment_create(path_in("frag.vds"), "f0.frag", &f), VDS_ERR_ALREADY_EXISTS, "f0.frag");
    EXPECT(vds_fragment_create(path_in("frag.vds"), "f2.frag", NULL), VDS_ERR_NULL_POINTER, "out_dataset");
    /* A writer that never sealed. */
    unsealed = fopen(path_in("never.frag"), "wb");
    if (unsealed) fclose(unsealed);
    OK(vds_open(path_in("frag.vds"), VDS_OPEN_WRITE, &ds));
    EXPECT(vds_merge_fragments(ds, NULL, 2, NULL, NULL), VDS_ERR_NULL_POINTER, "names");
    OK(vds_merge_fragments(ds, names, 3, &merged, &skipped));
    CHECK(merged == 2 && skipped == 1);
    start[0] = 0;
    shape[0] = 8;
    OK(vds_read(ds, 0, VDS_INT32, start, shape, NULL, 1, VDS_ORDER_C, (uint8_t *)back, sizeof back));
    for (i = 0; i < 8; i++) ok_all &= back[i] == (i / 4) * 100 + i % 4;
    CHECK(ok_all);
    OK(vds_close(ds));
}

/* The file's length in bytes (-1 when it cannot be read). */
static long file_length(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 ? (long)st.st_size : -1;
}

/* Whether the body of the container at `p` (after its head and two commit
 * slots, SPEC.md 1) starts with an index page, as the cloud-optimized
 * arrangement puts it (SPEC.md 9.4). */
static int index_comes_first(const char *p) {
    static unsigned char head[1 << 16];
    size_t n, i, lines = 0, h = 0, body;
    FILE *f = fopen(p, "rb");
    if (!f) return 0;
    n = fread(head, 1, sizeof head, f);
    fclose(f);
    for (i = 0; i < n && !h; i++)
        if (head[i] == '\n' && ++lines == 2) h = i + 1;
    body = h + 2 * (h % 4096 == 0 ? 512 : 128);
    return h && body + 4 <= n && memcmp(head + body, "VDSI", 4) == 0;
}

/* Held chunks: 100 single-element writes to one 4 KiB chunk store it once
 * by default and 100 times with the cache size (and buffer) at 0; then
 * compaction in its four modes. */
void test_write_back(void) {
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    const char *axes[1] = {"x"};
    uint64_t chunk[1] = {1024}, start[1] = {0}, one[1] = {1}, all[1] = {4096};
    static int32_t vals[4096], back[4096];
    long before, after;
    int i, round, ok_all = 1;
    for (i = 0; i < 4096; i++) vals[i] = i;
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "x", 4096, NULL, 0.0, 4095.0));
    OK(vds_builder_add_variable(b, "v", VDS_INT32, axes, 1, chunk));
    OK(vds_builder_set_overwrite(b, true));
    /* Aligned, so that the cloud-optimized compaction below puts the index
     * first (a compact container keeps it after its chunks, SPEC.md 9.4). */
    OK(vds_builder_set_layout(b, VDS_LAYOUT_ALIGNED));
    OK(vds_builder_create(b, path_in("held.vds"), &ds));
    OK(vds_builder_free(b));
    if (!ds) return;
    OK(vds_write(ds, 0, VDS_INT32, start, all, NULL, 1, VDS_ORDER_C, (const uint8_t *)vals, sizeof vals));
    OK(vds_commit(ds));
    for (round = 0; round < 2; round++) {
        /* round 0: the default buffer; round 1: none. */
        if (round == 1) OK(vds_set_cache_size(ds, 0));
        before = file_length(path_in("held.vds"));
        for (i = 0; i < 100; i++) {
            start[0] = (uint64_t)(i * 7 % 1024);
            vals[start[0]] = -(round * 1000 + i);
            OK(vds_write(ds, 0, VDS_INT32, start, one, NULL, 1, VDS_ORDER_C, (const uint8_t *)&vals[start[0]], sizeof vals[0]));
        }
        start[0] = 0;
        /* Reads see the held chunk before the commit. */
        OK(vds_read(ds, 0, VDS_INT32, start, all, NULL, 1, VDS_ORDER_C, (uint8_t *)back, sizeof back));
        CHECK(memcmp(vals, back, sizeof vals) == 0);
        OK(vds_commit(ds));
        after = file_length(path_in("held.vds"));
        if (round == 0) CHECK(after - before >= 4096 && after - before < 4096 + 8192);
        else CHECK(after - before >= 100 * 4096);
    }
    EXPECT(vds_set_cache_size(NULL, 0), VDS_ERR_NULL_POINTER, "dataset handle is NULL");
    /* Compaction reclaims the 100 superseded copies, then moves the chunks
     * out into a slot file and back. */
    {
        uint64_t before = 0, after = 0;
        uint16_t slot = 0;
        long was = file_length(path_in("held.vds"));
        OK(vds_compact(ds, VDS_COMPACT_KEEP_SLOTS, &before, &after));
        CHECK(before == (uint64_t)was && before > 100 * 4096);
        CHECK(!index_comes_first(path_in("held.vds")));
        CHECK(after < 4 * 4096 + 16384 && after == (uint64_t)file_length(path_in("held.vds")));
        EXPECT(vds_compact(ds, VDS_COMPACT_INTO_SLOTS, NULL, NULL), VDS_ERR_INVALID_ARGUMENT, "no external-file slot");
        EXPECT(vds_compact(ds, 7, NULL, NULL), VDS_ERR_INVALID_ARGUMENT, "not a vds_compact_mode");
        OK(vds_add_external_slot(ds, "held.vdx", &slot));
        OK(vds_commit(ds));
        OK(vds_set_slot_policy(ds, VDS_SLOTS_FIXED, &slot, 1, 0));
        OK(vds_compact(ds, VDS_COMPACT_INTO_SLOTS, &before, &after));
        /* All four chunks now follow the slot file's 32-byte header. */
        CHECK(after < before && file_length(path_in("held.vdx")) == 32 + 4 * 4096);
        OK(vds_read(ds, 0, VDS_INT32, start, all, NULL, 1, VDS_ORDER_C, (uint8_t *)back, sizeof back));
        CHECK(memcmp(vals, back, sizeof vals) == 0);
        OK(vds_compact(ds, VDS_COMPACT_FOLD_SLOTS, NULL, &after));
        CHECK(after > 4 * 4096);
        /* Cloud-optimized: the index right after the commit slots, then the chunks. */
        CHECK(!index_comes_first(path_in("held.vds")));
        OK(vds_compact(ds, VDS_COMPACT_CLOUD, &before, &after));
        CHECK(index_comes_first(path_in("held.vds")) && after == (uint64_t)file_length(path_in("held.vds")));
        OK(vds_read(ds, 0, VDS_INT32, start, all, NULL, 1, VDS_ORDER_C, (uint8_t *)back, sizeof back));
        CHECK(memcmp(vals, back, sizeof vals) == 0);
        CHECK(remove(path_in("held.vdx")) == 0);
    }
    OK(vds_close(ds));
    OK(vds_open(path_in("held.vds"), VDS_OPEN_READ, &ds));
    OK(vds_read(ds, 0, VDS_INT32, start, all, NULL, 1, VDS_ORDER_C, (uint8_t *)back, sizeof back));
    for (i = 0; i < 4096; i++) ok_all &= back[i] == vals[i];
    CHECK(ok_all);
    OK(vds_close(ds));
}

/* The bounded codec: every value within the tolerance, NaN and the fill value exact. */
void test_bounded(void) {
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    vds_variable_info info;
    const char *axes[2] = {"x", "y"};
    const uint64_t chunk[2] = {32, 40};
    uint64_t start[2] = {0, 0}, shape[2] = {64, 80};
    static float values[64 * 80], back[64 * 80];
    float fill = -999.25f;
    double tol = 0.01, got_tol = -1.0;
    int i, ok_all = 1;
    for (i = 0; i < 64 * 80; i++) {
        /* A smooth surface (no libm: the test links without it). */
        double u = (i % 80) * 0.05 - 2.0, v = (i / 80) * 0.03 - 1.0;
        values[i] = (float)(u * u * v - 0.5 * u + v * v * v);
    }
    values[7] = fill;
    values[8] = (float)NAN;
    OK(vds_builder_new(&b));
    OK(vds_builder_add_axis(b, "x", 64, NULL, 0.0, 63.0));
    OK(vds_builder_add_axis(b, "y", 80, NULL, 0.0, 79.0));
    OK(vds_builder_add_variable(b, "a", VDS_FLOAT32, axes, 2, chunk));
    OK(vds_builder_add_variable(b, "n", VDS_INT16, axes, 2, chunk));
    OK(vds_builder_set_fill(b, "a", (const uint8_t *)&fill, sizeof fill));
    OK(vds_builder_set_overwrite(b, true));
    EXPECT(vds_builder_set_bounded_codec(b, "a", 0.0, 3), VDS_ERR_INVALID_ARGUMENT, "tolerance 0 is not in (0, 1e300]");
    EXPECT(vds_builder_set_bounded_codec(b, "a", NAN, 3), VDS_ERR_INVALID_ARGUMENT, "is not in (0, 1e300]");
    EXPECT(vds_builder_set_bounded_codec(b, "a", tol, 23), VDS_ERR_INVALID_ARGUMENT, "zstd level 23");
    EXPECT(vds_builder_set_bounded_codec(b, "nope", tol, 3), VDS_ERR_NOT_FOUND, "no variable named");
    EXPECT(vds_builder_set_codec(b, "a", VDS_COMPRESSION_BOUNDED, 3, false), VDS_ERR_INVALID_ARGUMENT, "vds_builder_set_bounded_codec");
    OK(vds_builder_set_bounded_codec(b, "n", tol, 3));
    EXPECT(vds_builder_create(b, path_in("bounded.vds"), &ds), VDS_ERR_INVALID_ARGUMENT, "float32 or float64");
    OK(vds_builder_set_codec(b, "n", VDS_COMPRESSION_ZSTD, 1, true));
    OK(vds_builder_set_bounded_codec(b, "a", tol, 3));
    OK(vds_builder_create(b, path_in("bounded.vds"), &ds));
    OK(vds_builder_free(b));
    if (!ds) return;
    OK(vds_write(ds, 0, VDS_FLOAT32, start, shape, NULL, 2, VDS_ORDER_C, (const uint8_t *)values, sizeof values));
    OK(vds_close(ds));
    OK(vds_open(path_in("bounded.vds"), VDS_OPEN_READ, &ds));
    OK(vds_read(ds, 0, VDS_FLOAT32, start, shape, NULL, 2, VDS_ORDER_C, (uint8_t *)back, sizeof back));
    for (i = 0; i < 64 * 80; i++) {
        if (i == 7 || i == 8) {
            ok_all &= memcmp(&values[i], &back[i], sizeof(float)) == 0;
        } else {
            double d = (double)values[i] - (double)back[i];
            ok_all &= d <= tol && -d <= tol;
        }
    }
    CHECK(ok_all);
    OK(vds_get_variable_info(ds, 0, &info));
    CHECK(info.compression == VDS_COMPRESSION_BOUNDED && info.level == 3 && !info.shuffle);
    OK(vds_variable_tolerance(ds, 0, &got_tol));
    CHECK(got_tol == tol);
    OK(vds_variable_tolerance(ds, 1, &got_tol));
    CHECK(got_tol == 0.0);
    EXPECT(vds_variable_tolerance(ds, 2, &got_tol), VDS_ERR_OUT_OF_RANGE, "variable index 2");
    EXPECT(vds_variable_tolerance(ds, 0, NULL), VDS_ERR_NULL_POINTER, "out_tolerance is NULL");
    OK(vds_close(ds));
}
