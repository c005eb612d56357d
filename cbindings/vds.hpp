// vds.hpp - C++17 wrappers for libvds (header-only, over vds.h).
//
// Each handle is a move-only RAII type whose destructor calls its free
// function; failures throw vds::Error carrying the status and the message.
// Dataset's destructor closes without throwing: normally that commits (call
// close() to see a commit's failure), but while an exception unwinds the
// scope it first rolls uncommitted work back, so a failed sequence of
// writes never becomes half-committed.
#ifndef VDS_HPP
#define VDS_HPP

#include "vds.h"

#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace vds {

/// A failed libvds call: its status code and message.
class Error : public std::runtime_error {
  public:
    Error(vds_status status, const char *message) : std::runtime_error(message), status_(status) {}
    vds_status status() const noexcept { return status_; }

  private:
    vds_status status_;
};

/// Throws vds::Error unless `status` is VDS_OK.
inline void check(vds_status status) {
    if (status != VDS_OK) throw Error(status, vds_last_error_message());
}

/// The vds_dtype of a C++ element type.
template <typename T> struct dtype_of;
template <> struct dtype_of<int8_t> { static constexpr int32_t value = VDS_INT8; };
template <> struct dtype_of<int16_t> { static constexpr int32_t value = VDS_INT16; };
template <> struct dtype_of<int32_t> { static constexpr int32_t value = VDS_INT32; };
template <> struct dtype_of<int64_t> { static constexpr int32_t value = VDS_INT64; };
template <> struct dtype_of<uint8_t> { static constexpr int32_t value = VDS_UINT8; };
template <> struct dtype_of<uint16_t> { static constexpr int32_t value = VDS_UINT16; };
template <> struct dtype_of<uint32_t> { static constexpr int32_t value = VDS_UINT32; };
template <> struct dtype_of<uint64_t> { static constexpr int32_t value = VDS_UINT64; };
template <> struct dtype_of<float> { static constexpr int32_t value = VDS_FLOAT32; };
template <> struct dtype_of<double> { static constexpr int32_t value = VDS_FLOAT64; };
template <> struct dtype_of<bool> { static constexpr int32_t value = VDS_BOOL; };

/// A box of a variable: start and shape per dimension, optional step.
struct Region {
    std::vector<uint64_t> start, shape, step;
    /// Throws std::invalid_argument unless shape (and step, if given) match start in length.
    void check() const {
        if (shape.size() != start.size() || (!step.empty() && step.size() != start.size()))
            throw std::invalid_argument("vds::Region: start, shape and step must have the same length");
    }
    uint64_t size() const {
        uint64_t n = 1;
        for (uint64_t s : shape) n *= s;
        return n;
    }
};

/// An open container. Move-only; the destructor closes it.
class Dataset {
  public:
    explicit Dataset(vds_dataset *handle) noexcept : h_(handle), unwinding_(std::uncaught_exceptions()) {}
    Dataset(Dataset &&other) noexcept : h_(std::exchange(other.h_, nullptr)), unwinding_(std::uncaught_exceptions()) {}
    Dataset &operator=(Dataset &&other) noexcept {
        if (this != &other) {
            reset();
            h_ = std::exchange(other.h_, nullptr);
        }
        return *this;
    }
    Dataset(const Dataset &) = delete;
    Dataset &operator=(const Dataset &) = delete;
    ~Dataset() { reset(); }

    /// Opens `path` with VDS_OPEN_* flags.
    static Dataset open(const std::string &path, uint32_t flags = VDS_OPEN_READ) {
        vds_dataset *h = nullptr;
        check(vds_open(path.c_str(), flags, &h));
        return Dataset(h);
    }

    /// Commits (if writable) and closes; throws if the commit fails.
    void close() { check(vds_close(std::exchange(h_, nullptr))); }
    void commit() { check(vds_commit(h_)); }
    /// Discards uncommitted writes and attribute changes.
    void rollback() { check(vds_rollback(h_)); }

    size_t variable(const std::string &name) const {
        size_t index = 0;
        check(vds_variable_find(h_, name.c_str(), &index));
        return index;
    }

    template <typename T> std::vector<T> read(size_t var, const Region &r, vds_order order = VDS_ORDER_C) const {
        std::vector<T> out(static_cast<size_t>(r.size()));
        read_into(var, dtype_of<T>::value, r, order, reinterpret_cast<uint8_t *>(out.data()), out.size() * sizeof(T));
        return out;
    }

    template <typename T> void write(size_t var, const Region &r, const std::vector<T> &data, vds_order order = VDS_ORDER_C) {
        write_from(var, dtype_of<T>::value, r, order, reinterpret_cast<const uint8_t *>(data.data()), data.size() * sizeof(T));
    }

    /// Bool variables, one byte (0 or 1) per value: std::vector<bool> is packed and cannot be used.
    std::vector<uint8_t> read_bool(size_t var, const Region &r, vds_order order = VDS_ORDER_C) const {
        std::vector<uint8_t> out(static_cast<size_t>(r.size()));
        read_into(var, VDS_BOOL, r, order, out.data(), out.size());
        return out;
    }
    void write_bool(size_t var, const Region &r, const std::vector<uint8_t> &data, vds_order order = VDS_ORDER_C) {
        write_from(var, VDS_BOOL, r, order, data.data(), data.size());
    }

    void set_attribute(const std::string &key, const std::string &json, const char *var = nullptr) {
        check(vds_set_attribute(h_, var, key.c_str(), json.c_str()));
    }

    std::string descriptor_json() const { return fetch([&](char *b, size_t c, size_t *n) { return vds_descriptor_json(h_, b, c, n); }); }

    vds_dataset *handle() const noexcept { return h_; }

  private:
    void read_into(size_t var, int32_t dtype, const Region &r, vds_order order, uint8_t *buf, size_t len) const {
        r.check();
        check(vds_read(h_, var, dtype, r.start.data(), r.shape.data(), r.step.empty() ? nullptr : r.step.data(), r.start.size(), order,
                       buf, len));
    }
    void write_from(size_t var, int32_t dtype, const Region &r, vds_order order, const uint8_t *buf, size_t len) {
        r.check();
        check(vds_write(h_, var, dtype, r.start.data(), r.shape.data(), r.step.empty() ? nullptr : r.step.data(), r.start.size(), order,
                        buf, len));
    }
    /// Size query, then fetch; again if the string grew in between (another thread set an attribute).
    template <typename F> static std::string fetch(F f) {
        size_t needed = 0;
        check(f(nullptr, 0, &needed));
        for (;;) {
            std::string s(needed, '\0');
            vds_status st = f(&s[0], s.size(), &needed);
            if (st == VDS_ERR_BUFFER_TOO_SMALL) continue;
            check(st);
            s.resize(needed - 1);
            return s;
        }
    }
    void reset() noexcept {
        if (h_ && std::uncaught_exceptions() > unwinding_) vds_rollback(h_);
        if (h_) vds_close(h_);
        h_ = nullptr;
    }
    vds_dataset *h_;
    int unwinding_;  // exceptions in flight when this object was made
};

// std::vector<bool> is packed; use read_bool and write_bool instead.
template <> std::vector<bool> Dataset::read<bool>(size_t, const Region &, vds_order) const = delete;

/// Describes a container to create. Move-only; the destructor frees it.
class Builder {
  public:
    Builder() { check(vds_builder_new(&h_)); }
    Builder(Builder &&other) noexcept : h_(std::exchange(other.h_, nullptr)) {}
    Builder &operator=(Builder &&other) noexcept {
        if (this != &other) {
            vds_builder_free(h_);
            h_ = std::exchange(other.h_, nullptr);
        }
        return *this;
    }
    Builder(const Builder &) = delete;
    Builder &operator=(const Builder &) = delete;
    ~Builder() { vds_builder_free(h_); }

    /// An axis; without `last`, samples are 1 apart from `first` (descending axes: give both).
    Builder &axis(const std::string &name, uint64_t samples, const std::string &unit = "", double first = 0.0,
                  double last = std::numeric_limits<double>::quiet_NaN()) {
        if (std::isnan(last)) last = first + static_cast<double>(samples) - 1.0;
        check(vds_builder_add_axis(h_, name.c_str(), samples, unit.c_str(), first, last));
        return *this;
    }
    Builder &variable(const std::string &name, int32_t dtype, const std::vector<std::string> &axes, const std::vector<uint64_t> &chunk = {}) {
        std::vector<const char *> names;
        for (const auto &a : axes) names.push_back(a.c_str());
        check(vds_builder_add_variable(h_, name.c_str(), dtype, names.data(), names.size(), chunk.empty() ? nullptr : chunk.data()));
        return *this;
    }
    Builder &deflate(const std::string &var, uint32_t level, bool shuffle = true) {
        check(vds_builder_set_codec(h_, var.c_str(), VDS_COMPRESSION_DEFLATE, level, shuffle));
        return *this;
    }
    Builder &zstd(const std::string &var, uint32_t level, bool shuffle = true) {
        check(vds_builder_set_codec(h_, var.c_str(), VDS_COMPRESSION_ZSTD, level, shuffle));
        return *this;
    }
    /* Lossy, every value within `tolerance` of the value written (float32 and float64). */
    Builder &bounded(const std::string &var, double tolerance, uint32_t level = 3) {
        check(vds_builder_set_bounded_codec(h_, var.c_str(), tolerance, level));
        return *this;
    }
    template <typename T> Builder &fill(const std::string &var, T value) {
        check(vds_builder_set_fill(h_, var.c_str(), reinterpret_cast<const uint8_t *>(&value), sizeof value));
        return *this;
    }
    Builder &attribute(const std::string &key, const std::string &json) {
        check(vds_builder_set_attribute(h_, nullptr, key.c_str(), json.c_str()));
        return *this;
    }
    Builder &overwrite(bool yes = true) {
        check(vds_builder_set_overwrite(h_, yes));
        return *this;
    }
    Dataset create(const std::string &path) const {
        vds_dataset *ds = nullptr;
        check(vds_builder_create(h_, path.c_str(), &ds));
        return Dataset(ds);
    }

  private:
    vds_builder *h_ = nullptr;
};

}  // namespace vds

#endif  // VDS_HPP
