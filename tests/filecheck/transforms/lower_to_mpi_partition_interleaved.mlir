// Rows interleaved over the ranks (row k on rank k mod 3) reach the result file as one
// strided write per rank, not one per row: rank 0 rows 0, 3, 6 (3 runs of 32 bytes, 96
// apart), rank 1 rows 1, 4 and rank 2 rows 2, 5 (2 runs each); row 7, which no task
// writes, is one copy from the input, in rank 0's guard.
// RUN: dhir-opt %s -p 'dhir-place{ranks=3},dhir-lower-to-mpi{ranks=3 partition=true}' | filecheck %s

// CHECK:      scf.if %on0 {
// CHECK:        %[[AT:.*]] = arith.constant 0 : i64
// CHECK-NEXT:   %[[LENGTH:.*]] = arith.constant 32 : i64
// CHECK-NEXT:   %[[COUNT:.*]] = arith.constant 3 : i64
// CHECK-NEXT:   %[[STRIDE:.*]] = arith.constant 96 : i64
// CHECK-NEXT:   %[[COUNT2:.*]] = arith.constant 1 : i64
// CHECK-NEXT:   %[[STRIDE2:.*]] = arith.constant 0 : i64
// CHECK-NEXT:   func.call @dhir_rt_write_part(%0, %{{.*}}, %[[AT]], %[[LENGTH]], %[[COUNT]], %[[STRIDE]], %[[COUNT2]], %[[STRIDE2]])
// Rank 0's copy joins the guard of its write.
// CHECK-NEXT:   %[[CAT:.*]] = arith.constant 224 : i64
// CHECK-NEXT:   %[[CLENGTH:.*]] = arith.constant 32 : i64
// CHECK:        func.call @dhir_rt_copy_part(%0, %[[CAT]], %[[CLENGTH]],
// CHECK-NEXT: }
// CHECK-NOT:    dhir_rt_copy_part
// CHECK:      scf.if %on1 {
// CHECK:        %[[AT1:.*]] = arith.constant 32 : i64
// CHECK-NEXT:   %{{.*}} = arith.constant 32 : i64
// CHECK-NEXT:   %[[COUNT1:.*]] = arith.constant 2 : i64
// CHECK-NEXT:   %[[STRIDE1:.*]] = arith.constant 96 : i64
// CHECK:        func.call @dhir_rt_write_part(%0, %{{.*}}, %[[AT1]], %{{.*}}, %[[COUNT1]], %[[STRIDE1]],
// CHECK-NOT:    dhir_rt_write_part
// CHECK:      scf.if %on2 {
// CHECK:        %[[AT2:.*]] = arith.constant 64 : i64
// CHECK-NEXT:   %{{.*}} = arith.constant 32 : i64
// CHECK-NEXT:   %[[COUNT2:.*]] = arith.constant 2 : i64
// CHECK-NEXT:   %[[STRIDE2:.*]] = arith.constant 96 : i64
// CHECK:        func.call @dhir_rt_write_part(%0, %{{.*}}, %[[AT2]], %{{.*}}, %[[COUNT2]], %[[STRIDE2]],
// CHECK-NOT:    dhir_rt_write_part
// CHECK-NOT:    dhir_rt_copy_part
// CHECK:      func.return

func.func @main(%a: memref<8x4xf64>) {
  dhir.schedule %a {
    %cpu = dhir.target {kind = "cpu"}
    dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = arith.constant 0 : index
      scf.for %j = %c0 to %c4 step %c1 {
        %v = memref.load %a[%r, %j] : memref<8x4xf64>
        %w = arith.addf %v, %v : f64
        memref.store %w, %a[%r, %j] : memref<8x4xf64>
      }
    }
    dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = arith.constant 1 : index
      scf.for %j = %c0 to %c4 step %c1 {
        %v = memref.load %a[%r, %j] : memref<8x4xf64>
        %w = arith.addf %v, %v : f64
        memref.store %w, %a[%r, %j] : memref<8x4xf64>
      }
    }
    dhir.task %cpu, %a attributes {dhir.rank = 2 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = arith.constant 2 : index
      scf.for %j = %c0 to %c4 step %c1 {
        %v = memref.load %a[%r, %j] : memref<8x4xf64>
        %w = arith.addf %v, %v : f64
        memref.store %w, %a[%r, %j] : memref<8x4xf64>
      }
    }
    dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = arith.constant 3 : index
      scf.for %j = %c0 to %c4 step %c1 {
        %v = memref.load %a[%r, %j] : memref<8x4xf64>
        %w = arith.addf %v, %v : f64
        memref.store %w, %a[%r, %j] : memref<8x4xf64>
      }
    }
    dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = arith.constant 4 : index
      scf.for %j = %c0 to %c4 step %c1 {
        %v = memref.load %a[%r, %j] : memref<8x4xf64>
        %w = arith.addf %v, %v : f64
        memref.store %w, %a[%r, %j] : memref<8x4xf64>
      }
    }
    dhir.task %cpu, %a attributes {dhir.rank = 2 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = arith.constant 5 : index
      scf.for %j = %c0 to %c4 step %c1 {
        %v = memref.load %a[%r, %j] : memref<8x4xf64>
        %w = arith.addf %v, %v : f64
        memref.store %w, %a[%r, %j] : memref<8x4xf64>
      }
    }
    dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c4 = arith.constant 4 : index
      %r = arith.constant 6 : index
      scf.for %j = %c0 to %c4 step %c1 {
        %v = memref.load %a[%r, %j] : memref<8x4xf64>
        %w = arith.addf %v, %v : f64
        memref.store %w, %a[%r, %j] : memref<8x4xf64>
      }
    }
  }
  return
}
