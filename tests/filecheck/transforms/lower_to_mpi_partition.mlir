// With partition=true, a memref each rank can hold in part is recorded on the entry as
// its ranks' rows (dhir.bands: rank 0 rows 0..2, rank 1 rows 2..5 of %a; %b, which no
// task touches, none), the one row rank 1 reads of what rank 0 wrote travels as before,
// and at the end there is no gather: each rank writes its rows of %a to the result file,
// and rank 0 copies from the input what no rank holds (rows 6..7 of %a, all of %b).
// RUN: dhir-opt %s -p 'dhir-place{ranks=2},dhir-lower-to-mpi{ranks=2 partition=true}' | filecheck %s
// RUN: dhir-opt %s -p 'dhir-place{ranks=2},dhir-lower-to-mpi{ranks=2}' | filecheck %s --check-prefix=WHOLE

// CHECK: func.func @main(%a: memref<8x4xf64>, %b: memref<8x4xf64>) attributes {dhir.bands = {"0" = [array<i64: 0, 3>, array<i64: 2, 6>], "1" = [array<i64>, array<i64>]}, dhir.whole = {}}
// Rank 0's copies join the guard of its write (rank 1's guard comes after: the ranks
// run their own guards' ops only, so the order between them does not matter).
// CHECK:      scf.if %on0 {
// CHECK:        func.call @dhir_rt_write_part(%0, %{{.*}}, %{{.*}}, %{{.*}}
// CHECK-NEXT:   %[[AT:.*]] = arith.constant 192 : i64
// CHECK-NEXT:   %[[LENGTH:.*]] = arith.constant 64 : i64
// CHECK:        func.call @dhir_rt_copy_part(%0, %[[AT]], %[[LENGTH]],
// CHECK:        func.call @dhir_rt_copy_part(%1,
// CHECK-NEXT: }
// CHECK-NEXT: scf.if %on1 {
// CHECK:        func.call @dhir_rt_write_part(%0, %{{.*}}, %{{.*}}, %{{.*}}
// CHECK:      func.return
// CHECK:      func.call @dhir_rt_recv(
// CHECK-NOT:  dhir_rt_gatherv
// CHECK-NOT:  dhir_rt_send(
// CHECK: func.func private @dhir_rt_copy_part(i32, i64, i64, i64, i64, i64, i64)
// CHECK: func.func private @dhir_rt_write_part(i32, i64, i64, i64, i64, i64, i64, i64)

// WHOLE-NOT: dhir.bands
// WHOLE-NOT: dhir_rt_write_part
// WHOLE: func.call @dhir_rt_send(

func.func @main(%a: memref<8x4xf64>, %b: memref<8x4xf64>) {
  dhir.schedule %a, %b {
    %cpu = dhir.target {kind = "cpu"}
    dhir.task %cpu, %a attributes {dhir.rank = 0 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c3 = arith.constant 3 : index
      %c4 = arith.constant 4 : index
      %x = arith.constant 1.0 : f64
      scf.for %i = %c0 to %c3 step %c1 {
        scf.for %j = %c0 to %c4 step %c1 {
          memref.store %x, %a[%i, %j] : memref<8x4xf64>
        }
      }
    }
    dhir.task %cpu, %a attributes {dhir.rank = 1 : i64} {
      %c2 = arith.constant 2 : index
      %c1 = arith.constant 1 : index
      %c6 = arith.constant 6 : index
      %c0 = arith.constant 0 : index
      %c4 = arith.constant 4 : index
      scf.for %i = %c2 to %c6 step %c1 {
        scf.for %j = %c0 to %c4 step %c1 {
          %v = memref.load %a[%i, %j] : memref<8x4xf64>
          %w = arith.addf %v, %v : f64
          memref.store %w, %a[%i, %j] : memref<8x4xf64>
        }
      }
    }
  }
  return
}
