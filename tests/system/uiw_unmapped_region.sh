#!/usr/bin/env bash
# needs: uiw siw
# timeout: 600
# A peer writes into an advertised region the server process can no longer write (uiw_term_check
# server ... unmap|rdonly, client write-valid): an rdma_cm server on uiw0 registers a 64 KiB
# mmap()ed region with remote write and read access, advertises it in its accept's private
# data, and after the first Send munmap()s it (or mprotect()s it read-only) with the MR still
# registered; the client then writes 4 KiB into it with the right rkey and reads it back.
# The server process must survive (no SIGSEGV from placing the payload), its QP must reach ERR
# with its posted receive flushed, and the client's Read must complete in error (the server
# ended the stream with a Terminate). Cases: uiw1 client, CRC off (payload read from the socket
# straight into the region) and on (verified before it is placed, by the provider's guarded
# memcpy, and with UIW_APP_COPY=kernel by process_vm_writev), munmap and read-only; and a siw0
# client (munmap, CRC off).
# Then the local side: a uiw1 client Writes from a region it registered and munmap()ed (write-
# unmapped): its process must live and the Write complete with a local protection error (CRC
# on: the source read for the CRC fault-safely; off: the kernel's sendmsg refuses it, EFAULT),
# the server's QP must reach ERR with its receive flushed.
source "$UIW_ROOT/tests/system/lib.sh"
source "$UIW_ROOT/tests/system/interop_lib.bash"
interop_setup
kernel_cm_debug
term_build

port=7750
# unmapped_case NAME CLIENT_ADDR HOW: one connection, the server's region made unwritable by HOW.
unmapped_case() {
  term_pair "$1" "$UIW0_ADDR" "$2" $((port++)) write-valid "$3"
  expect "$1-server" "^ok: advertised region (unmapped|made read-only)" "$1: the server did not $3 its region"
  expect "$1-server" '^ok: receive flushed$' "$1: the server's receive was not flushed"
  expect "$1-server" '^ok: QP in ERR$' "$1: the server's QP did not reach ERR"
  expect "$1-client" '^ok: RDMA Read completed in error' "$1: the client's Read did not fail"
  log "PASS $1: server alive, QP in ERR; client: $(sed -n 's/^ok: RDMA Read completed in error //p' "$1-client.log")"
}

unmapped_case uiw-unmap "$UIW1_ADDR" unmap
unmapped_case uiw-rdonly "$UIW1_ADDR" rdonly
uiw_set mpa_crc=Y
unmapped_case uiw-unmap-crc "$UIW1_ADDR" unmap
unmapped_case uiw-rdonly-crc "$UIW1_ADDR" rdonly
export UIW_APP_COPY=kernel
unmapped_case uiw-unmap-crc-kernel-copy "$UIW1_ADDR" unmap
unmapped_case uiw-rdonly-crc-kernel-copy "$UIW1_ADDR" rdonly
unset UIW_APP_COPY
uiw_set mpa_crc=N
unmapped_case siw-unmap "$SIW0_ADDR" unmap

# source_case NAME [STATUS]: the client's Write from an unmapped source; STATUS, if given, is
# the completion status its provider must report.
source_case() {
  term_pair "$1" "$UIW0_ADDR" "$UIW1_ADDR" $((port++)) write-unmapped
  expect "$1-client" '^ok: source region unmapped' "$1: the client did not unmap its source"
  expect "$1-client" "^ok: Write from an unmapped source completed in error \\(${2:-.*}\\)" \
    "$1: the client's Write did not fail${2:+ with $2}"
  expect "$1-server" '^ok: receive flushed$' "$1: the server's receive was not flushed"
  log "PASS $1: client alive; $(sed -n 's/^ok: Write from an unmapped source completed in error //p' "$1-client.log")"
}

source_case uiw-source-unmap "local protection error"
uiw_set mpa_crc=Y
source_case uiw-source-unmap-crc "local protection error"
export UIW_APP_COPY=kernel
source_case uiw-source-unmap-crc-kernel-copy "local protection error"
unset UIW_APP_COPY
uiw_set mpa_crc=N
echo "PASS: a peer writing into an unmapped or read-only registered region, or a local Write from an unmapped one, ends the connection, not the process"
