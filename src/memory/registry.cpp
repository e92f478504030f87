// STag table: a fixed slot array read through a per-slot seqlock (check() takes no lock and does
// no RMW), written under one mutex. See registry.h for the contract.
#include "memory/registry.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <thread>

namespace uiw::memory {

namespace {

constexpr uint32_t kFlagValid = 1;
constexpr uint32_t kFlagRemoteInvalidate = 2;
// The slot's pin epoch (its counter pins[epoch]): reregister() flips it with the new values and
// waits for the old epoch's Pins only, so new placements never wait for it, nor it for them.
constexpr uint32_t kFlagEpoch = 4;

uint32_t epoch_of(uint32_t flags) {
  return (flags & kFlagEpoch) ? 1 : 0;
}
constexpr uint32_t kMaxSlots = 1u << 24;  // the STag index is 24 bits (RFC 5040 §4.4 figure)

uint32_t round_up_pow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v && p < kMaxSlots) p <<= 1;
  return p;
}

uint32_t log2_pow2(uint32_t p) {
  uint32_t n = 0;
  while ((1u << n) < p) ++n;
  return n;
}

// The host address `off` octets past `base`, in integer arithmetic: the base of a region over the
// whole address space (implicit ODP) is address 0, a null pointer C++ may not offset.
uint8_t* host_at(uint8_t* base, uint64_t off) {
  return reinterpret_cast<uint8_t*>(reinterpret_cast<uintptr_t>(base) + off);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

const char* access_result_name(AccessResult r) {
  switch (r) {
    case AccessResult::Ok:
      return "Ok";
    case AccessResult::InvalidStag:
      return "InvalidStag";
    case AccessResult::PdMismatch:
      return "PdMismatch";
    case AccessResult::StreamMismatch:
      return "StreamMismatch";
    case AccessResult::AccessDenied:
      return "AccessDenied";
    case AccessResult::BaseBounds:
      return "BaseBounds";
    case AccessResult::ToWrap:
      return "ToWrap";
  }
  return "?";
}

// Every field a reader looks at is an atomic accessed with relaxed loads inside the seqlock, so a
// reader racing a writer is well-defined (and TSan-clean); the seq check discards torn snapshots.
struct alignas(64) Registry::Slot {
  std::atomic<uint32_t> seq{0};   // odd while a writer is modifying the slot
  std::atomic<uint32_t> stag{0};  // full STag while registered, 0 when free or dying
  std::atomic<uint32_t> pd{0};
  std::atomic<uint32_t> stream{0};
  std::atomic<uint32_t> access{0};
  std::atomic<uint32_t> flags{0};
  std::atomic<uint8_t*> host{nullptr};
  std::atomic<uint64_t> iova{0};
  std::atomic<uint64_t> length{0};
  std::atomic<uint32_t> pins[2]{};  // live Pins per epoch (see Registry::pin)
  // Guarded by mu_ (check() never needs them: an unbound window is simply not valid). Packed
  // into the line's last 8 bytes: a slot is one cache line, so a Pin's counter never shares a
  // line with another region's, and the table is 64 bytes per region the device allows.
  uint32_t parent : 24 = 0;       // window: slot number of the region it is bound to
  uint32_t last_key : 8 = 0;      // a re-registration never reuses it
  uint32_t windows : 24 = 0;      // region: windows bound to it (at most every other slot)
  uint32_t window : 1 = 0;        // the slot is a memory window
  uint32_t bound : 1 = 0;         // window: bound to the region in slot `parent`
  uint32_t changing : 1 = 0;      // region: a reregister() waits for its old Pins
  uint32_t type2_window : 1 = 0;  // window: type 2 (else type 1)
};

struct Registry::Snapshot {
  uint32_t stag, pd, stream, access, flags;
  uint8_t* host;
  uint64_t iova, length;
};

Registry::Registry(uint32_t max_regions) {
  static_assert(sizeof(Slot) == 64, "a slot is one cache line");
  uint32_t n = round_up_pow2(max_regions == 0 ? 1 : max_regions);
  slots_.reset(new (std::nothrow) Slot[n]);
  if (!slots_) return;  // capacity 0: every registration fails with -ENOMEM
  nslots_ = n;
  slot_mask_ = n - 1;
  free_slots_.reserve(n);
  // With a full 2^24 table, slot 0 would give index 0 and possibly STag 0; never use it then.
  for (uint32_t i = (n == kMaxSlots ? 1 : 0); i < n; ++i) free_slots_.push_back(i);
  uint64_t seed = 0;
  if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != sizeof seed)
    seed = reinterpret_cast<uintptr_t>(this) ^ 0x9e3779b97f4a7c15ull;
  rng_state_ = seed;
}

Registry::~Registry() = default;

// RFC 5040 §8.1.1(8): STags must be hard to predict. Registration is the slow path, so each call
// asks the kernel for fresh randomness; the seeded splitmix64 is only a fallback.
uint32_t Registry::random32() {
  uint32_t v;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) == sizeof v) return v;
  uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return static_cast<uint32_t>(z ^ (z >> 31));
}

void Registry::read_slot(const Slot& s, Snapshot* o) const {
  for (;;) {
    uint32_t s1 = s.seq.load(std::memory_order_acquire);
    if (s1 & 1) {
      cpu_relax();
      continue;
    }
    o->stag = s.stag.load(std::memory_order_relaxed);
    o->pd = s.pd.load(std::memory_order_relaxed);
    o->stream = s.stream.load(std::memory_order_relaxed);
    o->access = s.access.load(std::memory_order_relaxed);
    o->flags = s.flags.load(std::memory_order_relaxed);
    o->host = s.host.load(std::memory_order_relaxed);
    o->iova = s.iova.load(std::memory_order_relaxed);
    o->length = s.length.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) == s1) return;
  }
}

template <typename F>
void Registry::write_slot(Slot& s, F&& f) {
  uint32_t q = s.seq.load(std::memory_order_relaxed);
  s.seq.store(q + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  f(s);
  s.seq.store(q + 2, std::memory_order_release);
}

Registry::Slot* Registry::find_locked(Stag stag) const {
  if (stag == 0 || nslots_ == 0) return nullptr;
  Slot& s = slots_[stag_index(stag) & slot_mask_];
  return s.stag.load(std::memory_order_relaxed) == stag ? &s : nullptr;
}

uint32_t Registry::alloc_pd() {
  std::lock_guard<std::mutex> g(mu_);
  while (next_pd_ == 0 || pd_refs_.count(next_pd_)) ++next_pd_;  // never 0, never in use
  uint32_t pd = next_pd_++;
  pd_refs_[pd] = 0;
  return pd;
}

int Registry::dealloc_pd(uint32_t pd) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = pd_refs_.find(pd);
  if (it == pd_refs_.end()) return -EINVAL;
  if (it->second != 0) return -EBUSY;
  pd_refs_.erase(it);
  return 0;
}

int Registry::check_region_args(void* addr, uint64_t length, uint64_t iova, uint32_t access) {
  if (access & ~kAllAccess) return -EINVAL;
  // Verbs (ibv_reg_mr): remote write / remote atomic require local write.
  if ((access & (kRemoteWrite | kRemoteAtomic)) && !(access & kLocalWrite)) return -EINVAL;
  // Address 0 starts only the region over the whole address space (verbs' implicit ODP MR).
  if (addr == nullptr && length != 0 && !(iova == 0 && length == kWholeAddressSpace))
    return -EINVAL;
  // The region end must be representable both as a tagged offset and as a host address.
  if (length > UINT64_MAX - iova) return -EINVAL;
  if (length > UINTPTR_MAX - reinterpret_cast<uintptr_t>(addr)) return -EINVAL;
  return 0;
}

void Registry::fill_slot_locked(uint32_t slot_no, Stag stag, uint32_t pd, void* addr,
                                uint64_t length, uint64_t iova, uint32_t access) {
  Slot& s = slots_[slot_no];
  s.last_key = stag_key(stag);
  s.window = false;
  s.bound = false;
  s.windows = 0;
  write_slot(s, [&](Slot& w) {
    w.pd.store(pd, std::memory_order_relaxed);
    w.stream.store(0, std::memory_order_relaxed);
    w.access.store(access, std::memory_order_relaxed);
    w.flags.store(kFlagValid | kFlagRemoteInvalidate, std::memory_order_relaxed);
    w.host.store(static_cast<uint8_t*>(addr), std::memory_order_relaxed);
    w.iova.store(iova, std::memory_order_relaxed);
    w.length.store(length, std::memory_order_relaxed);
    w.stag.store(stag, std::memory_order_relaxed);
  });
  ++pd_refs_[pd];
  live_.fetch_add(1, std::memory_order_relaxed);
}

Stag Registry::register_region(uint32_t pd, void* addr, uint64_t length, uint64_t iova,
                               uint32_t access, int* err) {
  int dummy;
  if (!err) err = &dummy;
  *err = check_region_args(addr, length, iova, access);
  if (*err) return 0;

  std::lock_guard<std::mutex> g(mu_);
  *err = -EINVAL;
  if (pd_refs_.find(pd) == pd_refs_.end()) return 0;
  uint32_t slot_no;
  Stag stag;
  if (!take_slot_locked(&slot_no, &stag)) {
    *err = -ENOMEM;
    return 0;
  }
  fill_slot_locked(slot_no, stag, pd, addr, length, iova, access);
  *err = 0;
  return stag;
}

// A random free slot, random index bits above the slot number and a random key: the STag space
// is populated sparsely over the full 24-bit index range (RFC 5040 §8.1.1(8)).
bool Registry::take_slot_locked(uint32_t* slot_no, Stag* stag) {
  if (free_slots_.empty()) return false;
  size_t pick = random32() % free_slots_.size();
  *slot_no = free_slots_[pick];
  free_slots_[pick] = free_slots_.back();
  free_slots_.pop_back();
  uint32_t shift = log2_pow2(nslots_);
  uint32_t index, key;
  do {
    uint32_t high = shift >= 24 ? 0 : (random32() << shift);
    index = (high | *slot_no) & (kMaxSlots - 1);
    key = random32() & 0xff;
  } while (index == 0 || key == slots_[*slot_no].last_key);
  *stag = (index << 8) | key;
  return true;
}

int Registry::register_region_with_stag(Stag stag, uint32_t pd, void* addr, uint64_t length,
                                        uint64_t iova, uint32_t access) {
  if (stag == 0) return -EINVAL;
  if (int rc = check_region_args(addr, length, iova, access)) return rc;

  std::lock_guard<std::mutex> g(mu_);
  if (pd_refs_.find(pd) == pd_refs_.end()) return -EINVAL;
  if (nslots_ == 0) return -ENOMEM;
  // The slot is fixed by the STag; it is usable only while it is on the free list (a dying slot,
  // still waiting for its pins in deregister(), is not).
  const uint32_t slot_no = stag_index(stag) & slot_mask_;
  auto it = std::find(free_slots_.begin(), free_slots_.end(), slot_no);
  if (it == free_slots_.end()) return -EBUSY;
  *it = free_slots_.back();
  free_slots_.pop_back();
  fill_slot_locked(slot_no, stag, pd, addr, length, iova, access);
  return 0;
}

int Registry::deregister(Stag stag) {
  Slot* s;
  uint32_t pd;
  {
    std::lock_guard<std::mutex> g(mu_);
    s = find_locked(stag);
    if (!s) return -ENOENT;
    if (s->window) return -EINVAL;
    if (s->windows != 0 || s->changing) return -EBUSY;  // verbs: windows keep a region
    pd = s->pd.load(std::memory_order_relaxed);
    // The slot is now "dying": unknown to check() and to every writer, not yet free.
    write_slot(*s, [](Slot& w) {
      w.stag.store(0, std::memory_order_relaxed);
      w.flags.store(0, std::memory_order_relaxed);
    });
  }
  wait_unpinned(*s, 3);
  std::lock_guard<std::mutex> g(mu_);
  free_slots_.push_back(static_cast<uint32_t>(s - slots_.get()));
  auto pit = pd_refs_.find(pd);
  if (pit != pd_refs_.end() && pit->second > 0) --pit->second;
  live_.fetch_sub(1, std::memory_order_relaxed);
  return 0;
}

void Registry::wait_unpinned(const Slot& s, uint32_t epochs) {
  // Pairs with the fence in pin() (Dekker): either the pinning reader saw the slot as written
  // before this, or we see its pin.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  for (uint32_t e = 0; e < 2; ++e)
    if (epochs & (1u << e))
      while (s.pins[e].load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

int Registry::reregister(Stag stag, const RegionUpdate& u) {
  Slot* s;
  uint32_t old_epoch;
  {
    std::lock_guard<std::mutex> g(mu_);
    s = find_locked(stag);
    if (!s) return -ENOENT;
    if (s->window) return -EINVAL;
    if (s->windows != 0 || s->changing) return -EBUSY;
    const uint32_t old_pd = s->pd.load(std::memory_order_relaxed);
    const uint32_t pd = u.pd.value_or(old_pd);
    const RegionUpdate::Translation t = u.translation.value_or(RegionUpdate::Translation{
        s->host.load(std::memory_order_relaxed), s->length.load(std::memory_order_relaxed),
        s->iova.load(std::memory_order_relaxed)});
    const uint32_t access = u.access.value_or(s->access.load(std::memory_order_relaxed));
    if (int rc = check_region_args(t.addr, t.length, t.iova, access)) return rc;
    if (pd_refs_.find(pd) == pd_refs_.end()) return -EINVAL;
    const uint32_t flags = s->flags.load(std::memory_order_relaxed);
    old_epoch = epoch_of(flags);
    write_slot(*s, [&](Slot& w) {
      w.pd.store(pd, std::memory_order_relaxed);
      w.access.store(access, std::memory_order_relaxed);
      w.host.store(static_cast<uint8_t*>(t.addr), std::memory_order_relaxed);
      w.iova.store(t.iova, std::memory_order_relaxed);
      w.length.store(t.length, std::memory_order_relaxed);
      w.flags.store(flags ^ kFlagEpoch, std::memory_order_relaxed);
    });
    if (pd != old_pd) {
      ++pd_refs_[pd];
      --pd_refs_[old_pd];
    }
    s->changing = true;
  }
  wait_unpinned(*s, 1u << old_epoch);
  std::lock_guard<std::mutex> g(mu_);
  s->changing = false;
  return 0;
}

int Registry::rereg_key(Stag old, Stag* out) {
  std::lock_guard<std::mutex> g(mu_);
  Slot* s = find_locked(old);
  if (!s) return -ENOENT;
  uint32_t key;
  do key = random32() & 0xff;
  while (key == stag_key(old) || key == s->last_key);
  Stag stag = (old & ~0xffu) | key;
  s->last_key = static_cast<uint8_t>(key);
  write_slot(*s, [&](Slot& w) { w.stag.store(stag, std::memory_order_relaxed); });
  if (out) *out = stag;
  return 0;
}

Mapping Registry::evaluate(const Snapshot& r, Stag stag, uint32_t pd, uint32_t stream,
                           uint32_t required_access, uint64_t to, uint64_t len) const {
  // RFC 5041 §7.1 tagged checks 1-2: the STag is valid and has an associated buffer.
  if (stag == 0 || r.stag != stag || !(r.flags & kFlagValid))
    return {AccessResult::InvalidStag, nullptr};
  // RFC 5041 §8.2 / RFC 5040 §8.1.1(1): only streams of the same PD may use the STag.
  if (r.pd != pd) return {AccessResult::PdMismatch, nullptr};
  // RFC 5041 §8.2 / RFC 5040 §8.1.1(2): a stream-scoped STag is unusable on other streams.
  if (r.stream != 0 && r.stream != stream) return {AccessResult::StreamMismatch, nullptr};
  // RFC 5040 §8.1.1(5): the access granted at registration bounds what the peer may do.
  if (required_access & ~r.access) return {AccessResult::AccessDenied, nullptr};
  // RFC 5041 §7.1 tagged check 5: the 64-bit sum of TO and length must not wrap. Checked first
  // so that the bounds arithmetic below cannot overflow.
  if (len > UINT64_MAX - to) return {AccessResult::ToWrap, nullptr};
  // RFC 5041 §7.1 tagged checks 3-4 and §8.1: octet-granular base and bounds.
  // register_region() guaranteed iova + length does not wrap.
  if (to < r.iova || to + len > r.iova + r.length) return {AccessResult::BaseBounds, nullptr};
  return {AccessResult::Ok, host_at(r.host, to - r.iova)};
}

Mapping Registry::check(Stag stag, uint32_t pd, uint32_t stream, uint32_t required_access,
                        uint64_t to, uint64_t len) const {
  if (stag == 0 || nslots_ == 0) return {AccessResult::InvalidStag, nullptr};
  Snapshot r;
  read_slot(slots_[stag_index(stag) & slot_mask_], &r);
  return evaluate(r, stag, pd, stream, required_access, to, len);
}

Registry::Pin Registry::pin(Stag stag, uint32_t pd, uint32_t stream, uint32_t required_access,
                            uint64_t to, uint64_t len) const {
  Pin p;
  if (stag == 0 || nslots_ == 0) return p;
  Slot& s = slots_[stag_index(stag) & slot_mask_];
  Snapshot r;
  for (;;) {
    const uint32_t e = epoch_of(s.flags.load(std::memory_order_relaxed));
    s.pins[e].fetch_add(1, std::memory_order_relaxed);
    // Pairs with the fence in wait_unpinned() (Dekker): the pin is visible before we read.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    read_slot(s, &r);
    if (epoch_of(r.flags) == e) {
      p.m_ = evaluate(r, stag, pd, stream, required_access, to, len);
      if (p.ok())
        p.pins_ = &s.pins[e];
      else
        s.pins[e].fetch_sub(1, std::memory_order_release);
      return p;
    }
    // A reregister() flipped the epoch in between: pin under the new one.
    s.pins[e].fetch_sub(1, std::memory_order_release);
  }
}

void Registry::Pin::release() {
  if (pins_) pins_->fetch_sub(1, std::memory_order_release);
  pins_ = nullptr;
  m_ = {AccessResult::InvalidStag, nullptr};
}

Registry::Pin& Registry::Pin::operator=(Pin&& o) noexcept {
  if (this != &o) {
    release();
    m_ = o.m_;
    pins_ = o.pins_;
    o.pins_ = nullptr;
  }
  return *this;
}

AccessResult Registry::invalidate_remote(Stag stag, uint32_t pd, uint32_t stream) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot* s = find_locked(stag);
  // RFC 5040 §7.2 item 4: the Invalidate STag must be valid.
  if (!s || !(s->flags.load(std::memory_order_relaxed) & kFlagValid))
    return AccessResult::InvalidStag;
  if (s->pd.load(std::memory_order_relaxed) != pd) return AccessResult::PdMismatch;
  // RFC 5040 §7.2 item 5: the STag must be associated with this RDMAP stream.
  uint32_t bound = s->stream.load(std::memory_order_relaxed);
  if (bound != 0 && bound != stream) return AccessResult::StreamMismatch;
  // RFC 5040 §8.1.1(7): an STag shared by several streams is not remotely invalidatable.
  uint32_t flags = s->flags.load(std::memory_order_relaxed);
  if (!(flags & kFlagRemoteInvalidate)) return AccessResult::AccessDenied;
  if (s->window) {
    unbind_window(lock, *s);
    return AccessResult::Ok;
  }
  write_slot(*s, [&](Slot& w) { w.flags.store(flags & ~kFlagValid, std::memory_order_relaxed); });
  lock.unlock();
  wait_unpinned(*s, 3);
  return AccessResult::Ok;
}

// Caller holds mu_. Changes the flag word of a registered region through the seqlock.
int Registry::update_flags_locked(Stag stag, uint32_t set, uint32_t clear, bool need_valid) {
  Slot* s = find_locked(stag);
  if (!s) return -ENOENT;
  uint32_t f = s->flags.load(std::memory_order_relaxed);
  if (need_valid && !(f & kFlagValid)) return -ENOENT;
  write_slot(*s, [&](Slot& w) { w.flags.store((f | set) & ~clear, std::memory_order_relaxed); });
  return 0;
}

int Registry::set_remote_invalidate(Stag stag, bool allowed) {
  std::lock_guard<std::mutex> g(mu_);
  return allowed ? update_flags_locked(stag, kFlagRemoteInvalidate, 0, false)
                 : update_flags_locked(stag, 0, kFlagRemoteInvalidate, false);
}

int Registry::invalidate_local(Stag stag) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot* s = find_locked(stag);
  if (s && s->window) {
    if (!s->type2_window) return -EINVAL;
    if (!s->bound) return -ENOENT;
    unbind_window(lock, *s);
    return 0;
  }
  const int rc = update_flags_locked(stag, 0, kFlagValid, true);
  if (rc != 0) return rc;
  lock.unlock();
  wait_unpinned(*s, 3);  // as in deregister()
  return 0;
}

void Registry::unbind_window(std::unique_lock<std::mutex>& lock, Slot& w) {
  write_slot(w, [](Slot& x) { x.flags.store(0, std::memory_order_relaxed); });
  w.bound = false;
  const uint32_t parent = w.parent;
  lock.unlock();
  // As in deregister(): a Pin taken before the flag went is waited for; one after sees it.
  wait_unpinned(w, 3);
  lock.lock();
  --slots_[parent].windows;
}

// A window starts as an empty region (it maps nothing: any access with a length fails its
// bounds), turned into an unbound window at once.
Stag Registry::alloc_mw(uint32_t pd, MwType type, int* err) {
  const Stag stag = register_region(pd, nullptr, 0, 0, 0, err);
  if (stag == 0) return 0;
  std::lock_guard<std::mutex> g(mu_);
  Slot& s = slots_[stag_index(stag) & slot_mask_];
  write_slot(s, [](Slot& w) { w.flags.store(0, std::memory_order_relaxed); });
  s.window = true;
  s.type2_window = type == MwType::Type2;
  return stag;
}

int Registry::register_window_with_stag(Stag stag, uint32_t pd, MwType type) {
  if (int rc = register_region_with_stag(stag, pd, nullptr, 0, 0, 0)) return rc;
  std::lock_guard<std::mutex> g(mu_);
  Slot& s = slots_[stag_index(stag) & slot_mask_];
  write_slot(s, [](Slot& w) { w.flags.store(0, std::memory_order_relaxed); });
  s.window = true;
  s.type2_window = type == MwType::Type2;
  return 0;
}

int Registry::bind_mw(Stag mw, uint8_t key, Stag mr, uint64_t addr, uint64_t length,
                      uint32_t access, uint32_t stream, Stag* out) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot* w = find_locked(mw);
  if (!w || !w->window) return -ENOENT;
  const bool type1 = !w->type2_window;
  if (w->bound && !type1) return -EINVAL;  // a type 2 window is invalidated before a new bind
  if (access & ~(kRemoteRead | kRemoteWrite | kRemoteAtomic)) return -EINVAL;
  const uint32_t pd = w->pd.load(std::memory_order_relaxed);
  if (length == 0 && type1) {  // verbs: a zero-length bind of a type 1 window unbinds it
    if (w->bound) unbind_window(lock, *w);
    if (out) *out = mw;
    return 0;
  }
  Slot* m = find_locked(mr);
  if (!m || m->window) return -ENOENT;
  const uint32_t m_access = m->access.load(std::memory_order_relaxed);
  const uint64_t m_iova = m->iova.load(std::memory_order_relaxed);
  const uint64_t m_len = m->length.load(std::memory_order_relaxed);
  if (!(m->flags.load(std::memory_order_relaxed) & kFlagValid) ||
      m->pd.load(std::memory_order_relaxed) != pd || !(m_access & kMwBind) ||
      ((access & (kRemoteWrite | kRemoteAtomic)) && !(m_access & kLocalWrite)) ||
      length > UINT64_MAX - addr || addr < m_iova || addr + length > m_iova + m_len ||
      (!type1 && stream == 0))
    return -EINVAL;
  if (w->bound) {
    unbind_window(lock, *w);  // a type 1 rebind; the lock was dropped meanwhile
    if (find_locked(mw) != w || !w->window || w->bound) return -EINVAL;  // raced another call
    m = find_locked(mr);
    if (!m || m->window || !(m->flags.load(std::memory_order_relaxed) & kFlagValid)) return -ENOENT;
  }
  uint8_t* host = host_at(m->host.load(std::memory_order_relaxed), addr - m_iova);
  const Stag stag = (mw & ~0xffu) | key;
  w->last_key = key;
  write_slot(*w, [&](Slot& x) {
    x.stream.store(type1 ? 0 : stream, std::memory_order_relaxed);
    x.access.store(access, std::memory_order_relaxed);
    x.host.store(host, std::memory_order_relaxed);
    x.iova.store(addr, std::memory_order_relaxed);
    x.length.store(length, std::memory_order_relaxed);
    x.stag.store(stag, std::memory_order_relaxed);
    // Only a type 2 window may be invalidated by the peer (Send with Invalidate).
    x.flags.store(kFlagValid | (type1 ? 0 : kFlagRemoteInvalidate), std::memory_order_relaxed);
  });
  w->bound = true;
  w->parent = static_cast<uint32_t>(m - slots_.get());
  ++m->windows;
  if (out) *out = stag;
  return 0;
}

// The window whose STag has mw's index, whatever its key: a type 2 bind gives the window a new
// key (the WR's rkey) that the ibv_mw, and so dealloc_mw()'s caller, never learns.
Registry::Slot* Registry::find_window_locked(Stag mw) const {
  if (mw == 0 || nslots_ == 0) return nullptr;
  Slot& s = slots_[stag_index(mw) & slot_mask_];
  const Stag cur = s.stag.load(std::memory_order_relaxed);
  return s.window && cur != 0 && stag_index(cur) == stag_index(mw) ? &s : nullptr;
}

int Registry::dealloc_mw(Stag mw) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot* w = find_window_locked(mw);
  if (!w) return -ENOENT;
  if (w->bound) unbind_window(lock, *w);
  if (find_window_locked(mw) != w || w->bound) return -ENOENT;  // raced another call
  w->window = false;  // deregister() refuses windows; from here it frees a plain slot
  const Stag cur = w->stag.load(std::memory_order_relaxed);
  lock.unlock();
  return deregister(cur);
}

int Registry::revalidate(Stag stag) {
  std::lock_guard<std::mutex> g(mu_);
  return update_flags_locked(stag, kFlagValid, 0, false);
}

int Registry::bind_stream(Stag stag, uint32_t stream) {
  std::lock_guard<std::mutex> g(mu_);
  Slot* s = find_locked(stag);
  if (!s) return -ENOENT;
  write_slot(*s, [&](Slot& w) { w.stream.store(stream, std::memory_order_relaxed); });
  return 0;
}

int Registry::query(Stag stag, RegionInfo* out) const {
  if (stag == 0 || nslots_ == 0) return -ENOENT;
  Snapshot r;
  read_slot(slots_[stag_index(stag) & slot_mask_], &r);
  if (r.stag != stag) return -ENOENT;
  if (out) {
    *out = RegionInfo{r.stag,
                      r.pd,
                      r.stream,
                      r.access,
                      (r.flags & kFlagValid) != 0,
                      (r.flags & kFlagRemoteInvalidate) != 0,
                      r.host,
                      r.iova,
                      r.length};
  }
  return 0;
}

uint32_t Registry::region_count() const {
  return live_.load(std::memory_order_relaxed);
}

}  // namespace uiw::memory
