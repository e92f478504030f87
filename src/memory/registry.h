// uiw::memory — STags, protection domains, access rights and base-and-bounds checks.
//
// The memory side of the RNIC security rules (RFC 5041 §8, RFC 5040 §8.1): every tagged placement
// and every RDMA Read source is validated here before a single byte is touched. Like siw_mem.c,
// check() returns a distinct result per failed check and never a wire code: the engine maps
// AccessResult to the DDP / RDMAP Terminate codes (one place, like siw_tagged_error).
//
// Thread safety: a Registry is shared by the application threads (register/deregister, under an
// internal mutex) and the progress thread (check(), lock-free: a per-slot seqlock). All methods
// may be called concurrently from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace uiw::memory {

// 24-bit index << 8 | 8-bit key (RFC 5040 §8.1.1(8): hard to predict, sparse over the full range).
// Never 0. The index carries random high bits above the slot number (see Registry), so STags are
// spread over the whole 24-bit index space even for a small table.
using Stag = uint32_t;

inline constexpr uint32_t stag_index(Stag s) {
  return s >> 8;
}
inline constexpr uint8_t stag_key(Stag s) {
  return static_cast<uint8_t>(s & 0xff);
}

// Same bit values as IBV_ACCESS_*; local read is implicit (required_access 0 = local read).
enum Access : uint32_t {
  kLocalWrite = 1,
  kRemoteWrite = 2,
  kRemoteRead = 4,
  kRemoteAtomic = 8,
  kMwBind = 16,
};
inline constexpr uint32_t kAllAccess =
    kLocalWrite | kRemoteWrite | kRemoteRead | kRemoteAtomic | kMwBind;

// One value per failed check, in check() order. Not a wire code (see engine for the mapping).
enum class AccessResult {
  Ok,
  InvalidStag,     // unknown index, key mismatch, deregistered or invalidated
  PdMismatch,      // STag belongs to another protection domain (RFC 5041 §8.2)
  StreamMismatch,  // STag bound to another DDP stream (RFC 5041 §8.2)
  AccessDenied,    // required access rights not granted (RFC 5040 §8.1.1(5))
  BaseBounds,      // outside [iova, iova + length) (RFC 5041 §7.1 tagged checks 3-4)
  ToWrap,          // to + len wraps 64 bits (RFC 5041 §7.1 tagged check 5)
};
const char* access_result_name(AccessResult);

// Memory windows (verbs): type 1 is bound by the consumer and rebound at will; type 2 is bound
// through one QP, whose stream alone may use it, and must be invalidated before it is bound again.
enum class MwType : uint8_t { Type1 = 1, Type2 = 2 };

struct Mapping {
  AccessResult result;
  uint8_t* host;  // address of byte `to` when result == Ok, else nullptr
};

// Snapshot of one region, for tools, tests and the engine's debug output.
struct RegionInfo {
  Stag stag;
  uint32_t pd;
  uint32_t stream;  // 0 = any stream of the PD
  uint32_t access;
  bool valid;
  bool remote_invalidate_allowed;
  uint8_t* host;
  uint64_t iova;
  uint64_t length;
};

// What a re-registration (ibv_rereg_mr) changes; an empty member keeps the region's value.
struct RegionUpdate {
  struct Translation {
    void* addr;
    uint64_t length;
    uint64_t iova;
  };
  std::optional<uint32_t> pd = std::nullopt;
  std::optional<Translation> translation = std::nullopt;
  std::optional<uint32_t> access = std::nullopt;
};

// The length of a region over the whole address space: addr nullptr, iova 0 (verbs' implicit
// on-demand-paging MR, ibv_reg_mr(pd, NULL, SIZE_MAX, IBV_ACCESS_ON_DEMAND | ...)). Every
// address is then its own tagged offset; what is not mapped fails at the access.
inline constexpr uint64_t kWholeAddressSpace = UINT64_MAX;

class Registry {
 public:
  // max_regions is rounded up to a power of two (at most 1 << 24). The slot table is allocated
  // once here, so check() never races with a table resize.
  explicit Registry(uint32_t max_regions = 4096);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // PDs are local identifiers (RFC 5041 §8.2: the peer cannot name or change them), never 0.
  uint32_t alloc_pd();
  int dealloc_pd(uint32_t pd);  // 0, -EINVAL unknown, -EBUSY while regions use it

  // iova = the tagged offset of byte 0 (verbs: the virtual address). Returns 0 and sets *err
  // (-EINVAL bad args/unknown pd, -ENOMEM table full) on failure. As in verbs, remote write and
  // remote atomic require local write (-EINVAL otherwise). `err` may be null.
  Stag register_region(uint32_t pd, void* addr, uint64_t length, uint64_t iova, uint32_t access,
                       int* err);
  // The same, under an STag chosen by someone else (uiw.ko allocates the device-unique STag of an
  // ibv_reg_mr and the provider registers the region under it). The STag's slot (its index modulo
  // capacity()) must be free: -EBUSY otherwise (another live region maps to it; the caller may
  // fall back to register_region). -EINVAL for STag 0 and the argument errors above.
  int register_region_with_stag(Stag stag, uint32_t pd, void* addr, uint64_t length, uint64_t iova,
                                uint32_t access);
  // 0, -ENOENT, -EBUSY while memory windows are bound to the region, -EINVAL for a window's STag
  // (dealloc_mw). When it returns, no Pin on this region is alive (see Pin): the buffer may be
  // freed (RFC 5041 §8.3.1(6): after revocation the RNIC can no longer modify the buffer).
  int deregister(Stag);
  // ibv_rereg_mr in place: the STag, its stream association and validity stay. The new values
  // are checked as register_region's (-EINVAL, also for an unknown PD or a window's STag);
  // -ENOENT unknown, -EBUSY while memory windows are bound to the region or while another
  // reregister() or deregister() of it runs. An access from then on sees the new values; when it
  // returns, every Pin taken under the old ones is gone (the old buffer may be freed), so a
  // placement concurrent with it lands in the old translation or in the new, never fails for it.
  int reregister(Stag, const RegionUpdate&);

  // Memory windows. A window is an STag of its own over part of a registered region (RFC 5040
  // §2.1), with its own remote rights; until bound (and once invalidated) check() refuses it
  // (InvalidStag). alloc_mw / register_window_with_stag: as for regions (0 + *err, or -errno).
  Stag alloc_mw(uint32_t pd, MwType type, int* err);
  int register_window_with_stag(Stag stag, uint32_t pd, MwType type);
  // Binds window `mw` (its current STag) to [addr, addr + length) of region `mr`, under the key
  // `key` (the window's next STag: same index). access: the remote rights (kRemoteRead,
  // kRemoteWrite, kRemoteAtomic). stream: type 2 the QP's stream, the only one that may use it;
  // type 1 any stream of the PD (0). The region must be valid, in the window's PD, allow
  // kMwBind, contain the range and, for remote write or atomic rights, allow local write. A
  // type 1 window is rebound in place (length 0: just unbound); a type 2 window must not be
  // bound. 0 and *out, or -ENOENT (unknown window or region), -EINVAL (any rule above).
  // Rebinding or unbinding waits for the window's live Pins, as deregister() does.
  int bind_mw(Stag mw, uint8_t key, Stag mr, uint64_t addr, uint64_t length, uint32_t access,
              uint32_t stream, Stag* out);
  // Unbinds (waiting for Pins) and frees the window with mw's index, under any key (the STag
  // alloc_mw gave, or the one of its latest bind). 0, -ENOENT.
  int dealloc_mw(Stag mw);
  // New key, same index, all other state kept (for rereg / fast-register / bind). The old STag
  // fails check() from now on. 0, -ENOENT.
  int rereg_key(Stag old, Stag* out);

  // The hot path, lock-free. Checks in this fixed order, first failure wins:
  //   1. valid STag: index names a live slot, key matches, not invalidated (RFC 5041 §7.1 tagged
  //   1-2)
  //   2. PD matches (RFC 5041 §8.2, RFC 5040 §8.1.1(1))
  //   3. stream association: region bound to `stream`, or unbound (0) (RFC 5041 §8.2)
  //   4. required_access is a subset of the region's access rights (RFC 5040 §8.1.1(5))
  //   5. to + len does not wrap 64 bits (RFC 5041 §7.1 tagged check 5)
  //   6. base and bounds: iova <= to && to + len <= iova + length (RFC 5041 §7.1 tagged 3-4, §8.1)
  // len == 0 is checked like any other length (to == iova + length is in bounds). NOTE: RFC 5041
  // §7.1 only requires validation of NON-zero-length tagged segments, and a zero-length tagged
  // segment must not be rejected for its STag/TO (e.g. a zero-length RDMA Write used as RTR). The
  // engine implements that by not calling check() for them; check() itself does not special-case 0.
  // The returned host pointer is only safe to write while the region cannot be deregistered:
  // use pin() when the caller cannot otherwise exclude a concurrent deregister().
  Mapping check(Stag, uint32_t pd, uint32_t stream, uint32_t required_access, uint64_t to,
                uint64_t len) const;

  // Remote invalidation (Send with Invalidate, RDMAP §5.3, §7.2 items 4-5). Order: valid STag ->
  // PD -> stream (bound to `stream` or unbound) -> remote_invalidate_allowed (AccessDenied,
  // RFC 5040 §8.1.1(7): an STag shared by several streams must not be remotely invalidatable).
  // On Ok the STag is invalidated (check() then returns InvalidStag until revalidate()) and its
  // live Pins are waited for, as deregister() does: once the invalidation is done (and the Send
  // that asked for it completes), no access through the STag is still in progress.
  AccessResult invalidate_remote(Stag, uint32_t pd, uint32_t stream);
  int set_remote_invalidate(Stag, bool allowed);  // default true at registration; 0, -ENOENT

  // 0, -ENOENT (unknown or already invalid), -EINVAL for a type 1 window (verbs: only a bind
  // changes one). A window is unbound, a region marked invalid; either's Pins are waited for.
  int invalidate_local(Stag);
  int revalidate(Stag);  // 0, -ENOENT (unknown)
  // STag <-> stream association (RFC 5041 §8.2); stream 0 removes it. 0, -ENOENT.
  int bind_stream(Stag, uint32_t stream);

  int query(Stag, RegionInfo* out) const;  // 0, -ENOENT (unknown; invalidated regions are found)
  uint32_t region_count() const;
  uint32_t capacity() const { return nslots_; }

  // A check() whose success keeps the region from being deregistered until the Pin dies:
  // deregister() waits for live pins. Hold a Pin only across one placement (one readv), never
  // across a wait for the network, or deregister() stalls; never deregister or invalidate a
  // region the calling thread itself has pinned (it would wait forever).
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& o) noexcept : m_(o.m_), pins_(o.pins_) { o.pins_ = nullptr; }
    Pin& operator=(Pin&& o) noexcept;
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin() { release(); }
    const Mapping& mapping() const { return m_; }
    bool ok() const { return m_.result == AccessResult::Ok; }
    void release();

   private:
    friend class Registry;
    Mapping m_{AccessResult::InvalidStag, nullptr};
    std::atomic<uint32_t>* pins_ = nullptr;  // Unowned: the slot's pin counter of its epoch.
  };
  Pin pin(Stag, uint32_t pd, uint32_t stream, uint32_t required_access, uint64_t to,
          uint64_t len) const;

 private:
  struct Slot;
  struct Snapshot;
  void read_slot(const Slot& s, Snapshot* out) const;  // seqlock read, lock-free
  Slot* find_locked(Stag) const;                       // requires mu_
  Slot* find_window_locked(Stag) const;                // requires mu_
  template <typename F>
  void write_slot(Slot& s, F&& f);  // requires mu_
  Mapping evaluate(const Snapshot&, Stag, uint32_t pd, uint32_t stream, uint32_t required_access,
                   uint64_t to, uint64_t len) const;
  int update_flags_locked(Stag, uint32_t set, uint32_t clear, bool need_valid);  // requires mu_
  uint32_t random32();                                                           // requires mu_
  static int check_region_args(void* addr, uint64_t length, uint64_t iova, uint32_t access);
  // Fills free slot `slot_no` (already taken off free_slots_) with a live region. Requires mu_.
  void fill_slot_locked(uint32_t slot_no, Stag stag, uint32_t pd, void* addr, uint64_t length,
                        uint64_t iova, uint32_t access);
  // A random free slot and a fresh STag for it (taken off free_slots_). Requires mu_.
  bool take_slot_locked(uint32_t* slot_no, Stag* stag);
  // Window `w` (locked, bound) becomes invalid: returns with mu_ held again after its Pins are
  // gone, the region it was bound to released.
  void unbind_window(std::unique_lock<std::mutex>& lock, Slot& w);
  // Waits (without mu_) until no Pin of `s` taken under `epochs` (bit e: epoch e) is alive.
  static void wait_unpinned(const Slot& s, uint32_t epochs);

  uint32_t nslots_ = 0;
  uint32_t slot_mask_ = 0;
  std::unique_ptr<Slot[]> slots_;

  mutable std::mutex mu_;             // serialises every writer; check() never takes it
  std::vector<uint32_t> free_slots_;  // guarded by mu_
  std::unordered_map<uint32_t, uint32_t> pd_refs_;  // pd -> live regions, guarded by mu_
  uint32_t next_pd_ = 1;                            // guarded by mu_
  uint64_t rng_state_ = 0;                          // guarded by mu_
  std::atomic<uint32_t> live_ = 0;
};

}  // namespace uiw::memory
