// Messages only where data crosses ranks, from its last writer, and only the elements
// the receiver needs; results reach rank 0 (no later use) or every rank (later use) at
// the end of the schedule.
// The steps (each task's incoming messages and guarded body) go into functions of up
// to 32 tasks each.
// RUN: dhir-opt %s --split-input-file -p 'dhir-place{ranks=2},dhir-lower-to-mpi{ranks=2}' | filecheck %s
// RUN: dhir-opt %s --split-input-file -p 'dhir-place{ranks=1},dhir-lower-to-mpi{ranks=1}' | filecheck %s --check-prefix=ONE
// RUN: dhir-opt %s --split-input-file -p 'dhir-place{ranks=2},dhir-lower-to-mpi{ranks=2 mpi=openmpi}' | filecheck %s --check-prefix=OMPI

// CHECK: builtin.module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">}
// OMPI: builtin.module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "OpenMPI">}
// CHECK-LABEL: func.func @main
// CHECK:      %comm = mpi.comm_world : !mpi.comm
// CHECK-NEXT: %rank = mpi.comm_rank(%comm) : i32
// CHECK-NEXT: %[[R0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %on0 = arith.cmpi eq, %rank, %[[R0]] : i32
// CHECK-NEXT: %[[R1:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %on1 = arith.cmpi eq, %rank, %[[R1]] : i32
// CHECK-NEXT: %[[TAG:.*]] = arith.constant 2 : i32
// CHECK-NEXT: func.call @main.schedule0.part0(%on0, %a, %b, %on1, %c) : (i1, memref<8xf32>, memref<8xf32>, i1, memref<2x4xf32>) -> ()
// The end: %c (written on rank 1) goes to rank 0 only, as bytes through dhir's runtime:
// the address and size of the one element written (c[0, 0], f32: 4 bytes), found on
// each side.
// CHECK-NEXT: scf.if %on1 {
// CHECK-NEXT:   %[[P:.*]] = memref.extract_aligned_pointer_as_index %c : memref<2x4xf32> -> index
// CHECK-NEXT:   %[[P64:.*]] = arith.index_cast %[[P]] : index to i64
// CHECK-NEXT:   %[[N:.*]] = arith.constant 4 : i64
// CHECK-NEXT:   func.call @dhir_rt_send(%[[P64]], %[[N]], %[[R0]], %[[TAG]]) : (i64, i64, i32, i32) -> ()
// CHECK-NEXT: }
// CHECK-NEXT: scf.if %on0 {
// CHECK-NEXT:   %[[Q:.*]] = memref.extract_aligned_pointer_as_index %c : memref<2x4xf32> -> index
// CHECK-NEXT:   %[[Q64:.*]] = arith.index_cast %[[Q]] : index to i64
// CHECK-NEXT:   %[[M:.*]] = arith.constant 4 : i64
// CHECK-NEXT:   func.call @dhir_rt_recv(%[[Q64]], %[[M]], %[[R1]], %[[TAG]]) : (i64, i64, i32, i32) -> ()
// CHECK-NEXT: }
// CHECK-NEXT: func.return
//
// CHECK:      func.func private @main.schedule0.part0(%on0: i1, %a: memref<8xf32>, %b: memref<8xf32>, %on1: i1, %c: memref<2x4xf32>) attributes {passthrough = ["noinline"], dhir.step = "part"} {
// CHECK-NEXT:   %[[T1:.*]] = arith.constant 1 : i32
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0 : i32
// task 0 (rank 0) writes %b from %a: no message; task 1 (rank 1) reads b[0], so rank 0
// posts a non-blocking send of that element (4 bytes, tag 1 = its position in the
// schedule, request slot 0) right after writing it, in the same branch.
// CHECK-NEXT:   scf.if %on0 {
// CHECK:          memref.store %{{.*}}, %b[%{{.*}}] : memref<8xf32>
// CHECK-NEXT:     %[[SLOT:.*]] = arith.constant 0 : i64
// CHECK-NEXT:     memref.extract_aligned_pointer_as_index %b
// CHECK-NEXT:     arith.index_cast
// CHECK-NEXT:     arith.constant 4 : i64
// CHECK-NEXT:     func.call @dhir_rt_isend(%{{.*}}, %{{.*}}, %[[T1]], %[[T1]], %[[SLOT]])
// task 2 (rank 0) reads %a (valid everywhere: no message) and writes it (WAR: no
// message); rank 0 completes its send at the end of the schedule. Both join rank 0's
// branch past rank 1's (each rank runs its own branch's ops only, in the same order).
// CHECK-NOT:      dhir_rt
// CHECK:          memref.store %{{.*}}, %a[%{{.*}}] : memref<8xf32>
// CHECK-NEXT:     %[[W:.*]] = arith.constant 0 : i64
// CHECK-NEXT:     func.call @dhir_rt_wait(%[[W]]) : (i64) -> ()
// CHECK-NEXT:   }
// Rank 1 receives, then runs task 1, in one branch.
// CHECK-NEXT:   scf.if %on1 {
// CHECK-NEXT:     memref.extract_aligned_pointer_as_index %b
// CHECK-NEXT:     arith.index_cast
// CHECK-NEXT:     arith.constant 4 : i64
// CHECK-NEXT:     func.call @dhir_rt_recv(%{{.*}}, %{{.*}}, %[[ZERO]], %[[T1]])
// CHECK:          memref.store %{{.*}}, %c[%{{.*}}, %{{.*}}] : memref<2x4xf32>
// CHECK-NEXT:   }
// CHECK-NEXT:   func.return
// CHECK:      func.func private @dhir_rt_isend(i64, i64, i32, i32, i64)
// CHECK-NEXT: func.func private @dhir_rt_recv(i64, i64, i32, i32)
// CHECK-NEXT: func.func private @dhir_rt_send(i64, i64, i32, i32)
// CHECK-NEXT: func.func private @dhir_rt_wait(i64)
//
// ONE-NOT: dhir_rt_send
// ONE-NOT: scf.if
func.func @main(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<2x4xf32>) {
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target {arch = "x86_64"}
    %t0 = dhir.task %cpu, %a, %b {
      %i = arith.constant 0 : index
      %x = memref.load %a[%i] : memref<8xf32>
      memref.store %x, %b[%i] : memref<8xf32>
    }
    %t1 = dhir.task %cpu, %b, %c {
      %i = arith.constant 0 : index
      %x = memref.load %b[%i] : memref<8xf32>
      memref.store %x, %c[%i, %i] : memref<2x4xf32>
    }
    %t2 = dhir.task %cpu, %a {
      %i = arith.constant 1 : index
      %x = memref.load %a[%i] : memref<8xf32>
      memref.store %x, %a[%i] : memref<8xf32>
    }
  }
  return
}

// -----

// A later read of %a by host code needs %a on every rank: one broadcast of the
// element written (a[0], 4 bytes) from its writer (rank 1 by round robin), through
// dhir's runtime.
// CHECK-LABEL: func.func @later_use
// CHECK:      func.call @later_use.schedule0.part0(%on0, %on1, %a)
// CHECK-NEXT: %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %a : memref<8xf32> -> index
// CHECK-NEXT: %[[P64:.*]] = arith.index_cast %[[PTR]] : index to i64
// CHECK-NEXT: %[[BYTES:.*]] = arith.constant 4 : i64
// CHECK-NEXT: func.call @dhir_rt_bcast(%[[P64]], %[[BYTES]], %{{.*}}) : (i64, i64, i32) -> ()
// CHECK:      memref.load %a
// CHECK:      func.func private @dhir_rt_bcast(i64, i64, i32)
func.func @later_use(%a: memref<8xf32>) -> f32 {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %idle = dhir.task %cpu, %a {
    }
    %t1 = dhir.task %cpu, %a {
      %i = arith.constant 0 : index
      %x = arith.constant 1.0 : f32
      memref.store %x, %a[%i] : memref<8xf32>
    }
  }
  %i = arith.constant 0 : index
  %v = memref.load %a[%i] : memref<8xf32>
  return %v : f32
}

// -----

// When something in the module calls the entry, its caller may read the results on
// any rank: written memrefs are broadcast even without a later use in the entry.
// CHECK-LABEL: func.func @main
// CHECK:       func.call @dhir_rt_bcast
func.func @main(%a: memref<8xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %idle = dhir.task %cpu, %a {
    }
    %t1 = dhir.task %cpu, %a {
      %i = arith.constant 0 : index
      %x = arith.constant 1.0 : f32
      memref.store %x, %a[%i] : memref<8xf32>
    }
  }
  return
}
func.func @twice(%a: memref<8xf32>) {
  func.call @main(%a) : (memref<8xf32>) -> ()
  func.call @main(%a) : (memref<8xf32>) -> ()
  return
}
