#pragma once

// One way to own a C library's handle: a std::unique_ptr whose deleter calls
// the library's free function. Each adapter names its own alias, e.g.
//   using IscsiContextPtr = CHandle<iscsi_context, iscsi_destroy_context>;
// so ownership is visible in the type, and a class holding one is move-only.

#include <memory>

namespace pathkeeper::daemon {

/// @brief Calls @p Free on a non-null handle; whatever Free returns is ignored.
template <auto Free> struct CDeleter {
  template <typename T> void operator()(T *handle) const noexcept {
    static_cast<void>(Free(handle));
  }
};

/// @brief An owning pointer to a C handle of type @p T, released with @p Free.
template <typename T, auto Free> using CHandle = std::unique_ptr<T, CDeleter<Free>>;

} // namespace pathkeeper::daemon
