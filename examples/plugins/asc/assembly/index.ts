// A Switchyard fairness policy written in AssemblyScript: shortest queue
// first. Among the queue heads the engine offers, the queue with the fewest
// tasks ready goes next (then the older head), so an agent that submits a
// task now and then is served before one that has queued hundreds. It is
// here to show that the plugin ABI (plugins/ABI.md) is language-neutral:
// plain exports with scalar arguments, fixed-width little-endian records in
// a guest-owned arena, no imports but switchyard.reason.
//
// Build: `go generate ./examples/plugins` (npm ci, then asc with
// asconfig.json: the stub runtime, which never collects, and no imports
// from "env": abort is routed to `trap` below).

// The arena: 64 KiB of static memory, enough for about 900 candidates; a
// larger request gets a new block from the stub allocator (never freed,
// and asked for only when the engine offers more candidates than ever).
const STATIC_ARENA: i32 = 64 << 10;
let arenaPtr: usize = memory.data(STATIC_ARENA, 16);
let arenaLen: i32 = STATIC_ARENA;

// Per-candidate scratch for one decision: tasks taken from the queue, and
// tasks picked for its agent and its lane.
const MAX_CANDS: u32 = 1024;
const taken: usize = memory.data(<i32>MAX_CANDS * 4, 16);
const agentPicked: usize = memory.data(<i32>MAX_CANDS * 4, 16);
const lanePicked: usize = memory.data(<i32>MAX_CANDS * 4, 16);

// Byte offsets in a candidate record, layout 1 (see plugins/ABI.md).
const HEAD_SEQ = 0;
const AGENT = 36;
const AGENT_INFLIGHT = 40;
const AGENT_LIMIT = 44;
const LANE = 52;
const LANE_INFLIGHT = 56;
const LANE_LIMIT = 60;
const QUEUE_LEN = 64;
const CANDIDATE_SIZE: u32 = 72;

@external("switchyard", "reason")
declare function reason(ptr: usize, len: i32): void;

// trap replaces AssemblyScript's abort (which would import env.abort): a
// failed assertion or bounds check ends the call with a trap, which the host
// counts as a fault.
function trap(message: string | null, file: string | null, line: u32, column: u32): void {
  unreachable();
}

function fail(message: string): i32 {
  const buf = String.UTF8.encode(message);
  reason(changetype<usize>(buf), buf.byteLength);
  return -1;
}

export function abi_version(): i32 {
  return 1;
}

// policy_flags: STATELESS. Answers depend only on the input.
export function policy_flags(): i32 {
  return 1;
}

export function arena(minLen: i32): i64 {
  if (minLen < 0) return 0;
  if (minLen > arenaLen) {
    let n = arenaLen;
    while (n < minLen) n <<= 1;
    arenaPtr = heap.alloc(<usize>n);
    arenaLen = n;
  }
  return (<i64>arenaPtr << 32) | <i64>(<u32>arenaLen);
}

export function fairness_pick(nowMs: i64, agingMs: i64, slots: i32, flags: i32): i32 {
  const base = arenaPtr;
  const layout = load<u32>(base);
  const size = load<u32>(base, 4);
  const count = load<u32>(base, 8);
  if (layout != 1 || size < CANDIDATE_SIZE) return fail("fairness_pick: unsupported record layout");
  if (count > MAX_CANDS) return fail("fairness_pick: more than 1024 candidates");
  if (slots < 0) return fail("fairness_pick: negative slots");
  const out = (base + 16 + <usize>count * <usize>size + 7) & ~(<usize>7);
  if (out + <usize>slots * 4 > base + <usize>arenaLen) return fail("fairness_pick: records overflow the arena");
  memory.fill(taken, 0, count * 4);
  memory.fill(agentPicked, 0, count * 4);
  memory.fill(lanePicked, 0, count * 4);

  let n: i32 = 0;
  while (n < slots) {
    let best: i32 = -1;
    let bestLeft: u32 = 0;
    let bestSeq: u64 = 0;
    for (let i: u32 = 0; i < count; i++) {
      const r = base + 16 + <usize>i * <usize>size;
      const t = load<u32>(taken + i * 4);
      const queued = load<u32>(r, QUEUE_LEN);
      if (t >= queued) continue;
      if (<u64>load<u32>(r, AGENT_INFLIGHT) + <u64>load<u32>(agentPicked + i * 4) >= <u64>load<u32>(r, AGENT_LIMIT)) continue;
      if (<u64>load<u32>(r, LANE_INFLIGHT) + <u64>load<u32>(lanePicked + i * 4) >= <u64>load<u32>(r, LANE_LIMIT)) continue;
      const left = queued - t;
      const seq = load<u64>(r, HEAD_SEQ);
      if (best < 0 || left < bestLeft || (left == bestLeft && seq < bestSeq)) {
        best = <i32>i;
        bestLeft = left;
        bestSeq = seq;
      }
    }
    if (best < 0) break;
    store<u32>(out + <usize>n * 4, <u32>best);
    n++;
    // Count the pick against its queue, and against every candidate of the
    // same agent and of the same lane.
    const b = base + 16 + <usize>best * <usize>size;
    const agent = load<u32>(b, AGENT);
    const lane = load<u16>(b, LANE);
    store<u32>(taken + <usize>best * 4, load<u32>(taken + <usize>best * 4) + 1);
    for (let i: u32 = 0; i < count; i++) {
      const r = base + 16 + <usize>i * <usize>size;
      if (load<u32>(r, AGENT) == agent) store<u32>(agentPicked + i * 4, load<u32>(agentPicked + i * 4) + 1);
      if (load<u16>(r, LANE) == lane) store<u32>(lanePicked + i * 4, load<u32>(lanePicked + i * 4) + 1);
    }
  }
  return n;
}
