/* Create a 2-D grid, write it, read one row back. Build after installing:
 *   cc example.c $(pkg-config --cflags --libs vds) -o example && ./example grid.vds */
#include <stdio.h>
#include <vds.h>

#define TRY(call)                                                                  \
    do {                                                                           \
        vds_status s_ = (call);                                                    \
        if (s_ != VDS_OK) {                                                        \
            fprintf(stderr, "%s: %s\n", vds_status_str(s_), vds_last_error_message()); \
            return 1;                                                              \
        }                                                                          \
    } while (0)

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "grid.vds";
    const char *axes[] = {"y", "x"};
    const uint64_t chunk[] = {64, 64}, start[] = {0, 0}, shape[] = {100, 200};
    const uint64_t row_start[] = {42, 0}, row_shape[] = {1, 200};
    static double grid[100 * 200], row[200];
    vds_builder *b = NULL;
    vds_dataset *ds = NULL;
    size_t i;

    for (i = 0; i < 100 * 200; i++) grid[i] = (double)i / 7.0;
    TRY(vds_builder_new(&b));
    TRY(vds_builder_add_axis(b, "y", 100, "m", 0.0, 990.0));
    TRY(vds_builder_add_axis(b, "x", 200, "m", 0.0, 1990.0));
    TRY(vds_builder_add_variable(b, "depth", VDS_FLOAT64, axes, 2, chunk));
    TRY(vds_builder_set_codec(b, "depth", VDS_COMPRESSION_DEFLATE, 6, true));
    TRY(vds_builder_set_overwrite(b, true));
    TRY(vds_builder_create(b, path, &ds));
    vds_builder_free(b);
    TRY(vds_write(ds, 0, VDS_FLOAT64, start, shape, NULL, 2, VDS_ORDER_C, (const uint8_t *)grid, sizeof grid));
    TRY(vds_close(ds)); /* commits */

    TRY(vds_open(path, VDS_OPEN_READ, &ds));
    TRY(vds_read(ds, 0, VDS_FLOAT64, row_start, row_shape, NULL, 2, VDS_ORDER_C, (uint8_t *)row, sizeof row));
    printf("row 42 starts %.4f %.4f, ends %.4f\n", row[0], row[1], row[199]);
    TRY(vds_close(ds));
    return row[199] == grid[42 * 200 + 199] ? 0 : 1;
}
