// Copies between uiw's own buffers and application memory that a peer's message names (the
// bytes of a registered region), which may fault at any moment without costing the process.
//
// Registration pins nothing (the provider advertises on-demand paging, under which unmapping a
// registered range is legal), so by the time a peer's Write, Send or Read Response is placed, or
// a Read Request answered, any registered page may be unmapped, made read-only, or lie beyond
// the end of a truncated file. A plain CPU copy would then raise SIGSEGV or SIGBUS in the whole
// application. Two mechanisms, chosen once per process (UIW_APP_COPY; ThreadSanitizer builds
// always take the second):
//  - guarded (default): memcpy under a SIGSEGV/SIGBUS handler that uiw installs on first use,
//    keeping the previous one. A fault inside the application range of a copy in progress in
//    the faulting thread ends that copy with EFAULT (siglongjmp); every other fault goes to the
//    handler that was there before (or the default action), so the application's own faults and
//    handlers behave as without uiw. Costs a memcpy. An application that later replaces the
//    handler without chaining to it loses the protection (its handler sees the fault).
//  - kernel: process_vm_writev(2) / process_vm_readv(2) on the calling process copy with the
//    kernel's fault handling and report EFAULT (ptrace_may_access() admits the same thread
//    group). Needs no signal handler; costs a system call and a page-table walk per copy
//    (about 1.3 us for 8 octets and 6-8 us for 64 KiB on the bench host, memcpy 1.2-2 us).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace uiw::memory {

// 0, or -EFAULT when some destination page cannot be written (nothing is said about how many
// octets were written before it).
int copy_to_app(void* app_dst, const void* src, size_t n);
// 0, or -EFAULT when some source page cannot be read.
int copy_from_app(void* dst, const void* app_src, size_t n);
// Feeds n octets of application memory into a raw CRC32c state (wire::crc32c_update): 0, or
// -EFAULT when some source page cannot be read (*state is then meaningless). The guarded
// mechanism reads the octets where they are (no copy: a send's CRC is one pass over memory the
// kernel then reads again from cache); the kernel mechanism copies them through bounce, grown
// on first use.
int crc32c_update_from_app(uint32_t* state, const void* app_src, size_t n,
                           std::vector<uint8_t>& bounce);
// True when copies go through the kernel (UIW_APP_COPY=kernel, or the handler could not be
// installed) and the kernel refused the system calls (seccomp, ENOSYS), so copies are plain
// memcpy without fault safety. Reported once on stderr when it first happens.
bool app_copy_unsafe();

// One atomic read-modify-write of the 8-octet-aligned application word at app_target (an RDMA
// atomic's target): *original receives the value it held, and update(original) is stored in
// the same atomic step (a compare-and-swap loop; the store happens even when update returns
// its argument, so the word must be writable either way). 0, or -EFAULT when the word cannot
// be read or written. The kernel mechanism has no atomic system call: it checks that the word
// is mapped and readable first, then updates it in place; a read-only or concurrently
// unmapped page still faults there.
int atomic_update_app_raw(uint64_t* app_target, uint64_t* original,
                          uint64_t (*update)(const void* ctx, uint64_t v), const void* ctx);
template <typename Update>
int atomic_update_app(uint64_t* app_target, uint64_t* original, const Update& update) {
  return atomic_update_app_raw(
      app_target, original,
      [](const void* ctx, uint64_t v) { return (*static_cast<const Update*>(ctx))(v); }, &update);
}

}  // namespace uiw::memory
