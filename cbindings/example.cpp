// A C++17 program using libvds through vds.hpp: creates a 3-D volume,
// writes it, reads a slice back, and shows how errors arrive as exceptions.
//
//   c++ -std=c++17 example.cpp $(pkg-config --cflags --libs vds) && ./a.out volume.vds
#include "vds.hpp"

#include <cmath>
#include <cstdio>

int main(int argc, char **argv) {
    const std::string path = argc > 1 ? argv[1] : "example.vds";
    const uint64_t ni = 24, nx = 16, nt = 40;
    try {
        std::vector<float> volume(ni * nx * nt);
        for (size_t k = 0; k < volume.size(); k++) volume[k] = std::sin(0.01f * static_cast<float>(k));
        {
            vds::Dataset ds = vds::Builder()
                                  .axis("inline", ni)
                                  .axis("crossline", nx)
                                  .axis("time", nt, "ms", 0.0, 156.0)
                                  .variable("amplitude", VDS_FLOAT32, {"inline", "crossline", "time"}, {8, 8, 8})
                                  .variable("live", VDS_BOOL, {"inline", "crossline"})
                                  .deflate("amplitude", 6)
                                  .zstd("live", 3)
                                  .fill("amplitude", -1.0f)
                                  .attribute("source", "\"example.cpp\"")
                                  .overwrite()
                                  .create(path);
            ds.write<float>(0, {{0, 0, 0}, {ni, nx, nt}, {}}, volume);
            std::vector<uint8_t> live(ni * nx);
            for (size_t k = 0; k < live.size(); k++) live[k] = k % 5 != 0;
            ds.write_bool(ds.variable("live"), {{0, 0}, {ni, nx}, {}}, live);
            ds.close();  // commits; the destructor would too, without reporting errors
        }
        // An exception between writes: the destructor rolls the first write back
        // instead of committing half of the work.
        try {
            vds::Dataset ds = vds::Dataset::open(path, VDS_OPEN_WRITE);
            ds.write<float>(0, {{0, 0, 0}, {1, 1, 1}, {}}, std::vector<float>{42.0f});
            ds.write<double>(0, {{0, 0, 1}, {1, 1, 1}, {}}, std::vector<double>{43.0});  // throws: wrong type
        } catch (const vds::Error &) {
        }
        vds::Dataset ds = vds::Dataset::open(path);
        size_t amp = ds.variable("amplitude");
        // A time slice at t = 10, in Fortran order (inline fastest).
        std::vector<float> slice = ds.read<float>(amp, {{0, 0, 10}, {ni, nx, 1}, {}}, VDS_ORDER_FORTRAN);
        for (uint64_t i = 0; i < ni; i++)
            for (uint64_t x = 0; x < nx; x++)
                if (slice[i + ni * x] != volume[(i * nx + x) * nt + 10]) {
                    std::fprintf(stderr, "mismatch at inline %llu crossline %llu\n", (unsigned long long)i, (unsigned long long)x);
                    return 1;
                }
        if (ds.read<float>(amp, {{0, 0, 0}, {1, 1, 1}, {}})[0] != volume[0]) {
            std::fprintf(stderr, "a write before the exception was committed\n");
            return 1;
        }
        std::vector<uint8_t> live = ds.read_bool(ds.variable("live"), {{0, 0}, {ni, nx}, {}});
        for (size_t k = 0; k < live.size(); k++)
            if (live[k] != (k % 5 != 0)) return 1;
        try {
            ds.read<double>(amp, {{0, 0, 0}, {1, 1, 1}, {}});
            std::fprintf(stderr, "reading float32 as double should throw\n");
            return 1;
        } catch (const vds::Error &e) {
            if (e.status() != VDS_ERR_TYPE_MISMATCH) return 1;
            std::printf("expected error: %s\n", e.what());
        }
        std::printf("descriptor: %.60s...\n", ds.descriptor_json().c_str());
        std::printf("example: read back and verified %zu values\n", slice.size());
    } catch (const vds::Error &e) {
        std::fprintf(stderr, "libvds error %d: %s\n", static_cast<int>(e.status()), e.what());
        return 1;
    }
    return 0;
}
