// Copies between uiw's own buffers and application memory that a peer's message names (the
// bytes of a registered region), made by the kernel instead of by memcpy.
//
// Registration pins nothing (the provider advertises on-demand paging, under which unmapping a
// registered range is legal), so by the time a peer's Write, Send or Read Response is placed, or
// a Read Request answered, any registered page may be unmapped, made read-only, or lie beyond
// the end of a truncated file. A CPU copy would then raise SIGSEGV or SIGBUS in the whole
// application; process_vm_writev(2) / process_vm_readv(2) on the calling process do the same
// copy with the kernel's fault handling and report EFAULT instead (a process may always access
// its own memory this way: ptrace_may_access() admits the same thread group).
#pragma once

#include <cstddef>

namespace uiw::memory {

// 0, or -EFAULT when some destination page cannot be written (nothing is said about how many
// octets were written before it).
int copy_to_app(void* app_dst, const void* src, size_t n);
// 0, or -EFAULT when some source page cannot be read.
int copy_from_app(void* dst, const void* app_src, size_t n);
// True when the kernel refused the system calls (seccomp, ENOSYS) and copies fall back to
// memcpy, without fault safety. Reported once on stderr when it first happens.
bool app_copy_unsafe();

}  // namespace uiw::memory
