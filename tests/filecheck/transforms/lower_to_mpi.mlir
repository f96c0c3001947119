// Messages only where data crosses ranks, from its last writer; results reach
// rank 0 (no later use) or every rank (later use) at the end of the schedule.
// RUN: dhir-opt %s --split-input-file -p 'dhir-place{ranks=2},dhir-lower-to-mpi{ranks=2}' | filecheck %s
// RUN: dhir-opt %s --split-input-file -p 'dhir-place{ranks=1},dhir-lower-to-mpi{ranks=1}' | filecheck %s --check-prefix=ONE
// RUN: dhir-opt %s --split-input-file -p 'dhir-place{ranks=2},dhir-lower-to-mpi{ranks=2 mpi=openmpi}' | filecheck %s --check-prefix=OMPI

// CHECK: builtin.module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "MPICH">}
// OMPI: builtin.module attributes {dlti.map = #dlti.map<"MPI:Implementation" = "OpenMPI">}
// CHECK-LABEL: func.func @main
// CHECK:      %[[COMM:.*]] = mpi.comm_world : !mpi.comm
// CHECK-NEXT: %rank = mpi.comm_rank(%[[COMM]]) : i32
// CHECK-NEXT: %[[R0:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[ON0:.*]] = arith.cmpi eq, %rank, %[[R0]] : i32
// task 0 (rank 0) writes %b from %a.
// CHECK-NEXT: scf.if %[[ON0]] {
// CHECK:        memref.store %{{.*}}, %b[%{{.*}}] : memref<8xf32>
// CHECK:      }
// CHECK-NEXT: %[[R1:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[ON1:.*]] = arith.cmpi eq, %rank, %[[R1]] : i32
// task 1 (rank 1) reads %b: rank 0 sends it (tag 1 = its position in the schedule).
// CHECK-NEXT: scf.if %[[ON0]] {
// CHECK-NEXT:   mpi.send(%b, %[[R1]], %[[R1]], %[[COMM]]) : memref<8xf32>, i32, i32
// CHECK-NEXT: }
// CHECK-NEXT: scf.if %[[ON1]] {
// CHECK-NEXT:   mpi.recv(%b, %[[R1]], %[[R0]], %[[COMM]]) : memref<8xf32>, i32, i32
// CHECK-NEXT: }
// CHECK-NEXT: scf.if %[[ON1]] {
// CHECK:        memref.store %{{.*}}, %c[%{{.*}}, %{{.*}}] : memref<2x4xf32>
// CHECK:      }
// task 2 (rank 0) reads %a (valid everywhere: no message) and writes %a (WAR: no message).
// CHECK-NEXT: scf.if %[[ON0]] {
// CHECK:        memref.store %{{.*}}, %a[%{{.*}}] : memref<8xf32>
// CHECK:      }
// The end: %c (written on rank 1, 2-D, sent flattened) goes to rank 0 only.
// CHECK:      %[[FLAT:.*]] = memref.collapse_shape %c
// CHECK-NEXT: scf.if %[[ON1]] {
// CHECK-NEXT:   mpi.send(%[[FLAT]], %{{.*}}, %[[R0]], %[[COMM]]) : memref<8xf32>, i32, i32
// CHECK:      scf.if %[[ON0]] {
// CHECK-NEXT:   mpi.recv(%[[FLAT]], %{{.*}}, %[[R1]], %[[COMM]]) : memref<8xf32>, i32, i32
// CHECK-NOT:  mpi.
// CHECK:      func.return
// ONE-NOT: mpi.send
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

// A later read of %a by host code needs %a on every rank: one broadcast from
// its last writer (rank 1 by round robin), through dhir's runtime.
// CHECK-LABEL: func.func @later_use
// CHECK:      scf.if %{{.*}} {
// CHECK:        memref.store
// CHECK:      %[[PTR:.*]] = memref.extract_aligned_pointer_as_index %a : memref<8xf32> -> index
// CHECK-NEXT: %[[P64:.*]] = arith.index_cast %[[PTR]] : index to i64
// CHECK-NEXT: %[[BYTES:.*]] = arith.constant 32 : i64
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
