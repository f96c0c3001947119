// On an SPMD entry, the gathers that take a result from its shard to an out-parameter
// used for nothing else become one call writing the shard to the result file, and the
// slices that take an argument to its shard, one call reading it: the calls' buffers
// stay (never touched), the copy goes, and both parameters get an empty band (no rank
// holds them). The box's words: dimensions, element bytes, whether padding is -0.0,
// pieces per rank, whole, shard, then per rank whether it writes and each piece of its
// real shard: where it starts in the whole, where in the shard, and its shape.
// RUN: dhir-opt %s -p dhir-shard-collectives | filecheck %s

func.func private @__dhir_collective0(memref<4x3xf32>) -> memref<2x3xf32> attributes {dhir.collective = {grid = array<i64: 1, 2, 1, 0>, calls = {"0:dhir_rt_shard_all_slice" = array<i64: 1, 24>}, argument = 0 : i64, box = array<i64: 2, 4, 0, 1, 4, 3, 2, 3, 1, 0, 0, 0, 0, 2, 3, 1, 2, 0, 0, 0, 2, 3>}}
func.func private @__dhir_collective1(memref<2x3xf32>) -> memref<4x3xf32> attributes {dhir.collective = {grid = array<i64: 1, 2, 1, 0>, calls = {"0:dhir_rt_shard_all_gather" = array<i64: 1, 24>}, result = 0 : i64, box = array<i64: 2, 4, 0, 1, 4, 3, 2, 3, 1, 0, 0, 0, 0, 2, 3, 1, 2, 0, 0, 0, 2, 3>}}
func.func @main(%a: memref<4x3xf32>, %out: memref<4x3xf32>) attributes {dhir.spmd} {
  %s = func.call @__dhir_collective0(%a) : (memref<4x3xf32>) -> memref<2x3xf32>
  %g = func.call @__dhir_collective1(%s) : (memref<2x3xf32>) -> memref<4x3xf32>
  memref.copy %g, %out : memref<4x3xf32> to memref<4x3xf32>
  func.return
}

// The out-parameter is read again after the copy: the gather runs.
func.func private @__dhir_collective2(memref<2x3xf32>) -> memref<4x3xf32> attributes {dhir.collective = {grid = array<i64: 1, 2, 1, 0>, calls = {"0:dhir_rt_shard_all_gather" = array<i64: 1, 24>}, result = 0 : i64, box = array<i64: 2, 4, 0, 1, 4, 3, 2, 3, 1, 0, 0, 0, 0, 2, 3, 1, 2, 0, 0, 0, 2, 3>}}
func.func @used(%a: memref<2x3xf32>, %out: memref<4x3xf32>) attributes {dhir.spmd} {
  %g = func.call @__dhir_collective2(%a) : (memref<2x3xf32>) -> memref<4x3xf32>
  memref.copy %g, %out : memref<4x3xf32> to memref<4x3xf32>
  %c0 = arith.constant 0 : index
  %x = memref.load %out[%c0, %c0] : memref<4x3xf32>
  memref.store %x, %out[%c0, %c0] : memref<4x3xf32>
  func.return
}

// CHECK:      memref.global "private" constant @__dhir_box0 : memref<22xi64> = dense<[2, 4, 0, 1, 4, 3, 2, 3, 1, 0, 0, 0, 0, 2, 3, 1, 2, 0, 0, 0, 2, 3]>
// CHECK:      func.func @main(%a: memref<4x3xf32>, %out: memref<4x3xf32>) attributes {dhir.spmd, dhir.shard_bands = {"0" = [array<i64>, array<i64>], "1" = [array<i64>, array<i64>]}}
// CHECK-NEXT:   %[[SHARD:.*]] = memref.alloc() : memref<2x3xf32>
// CHECK:        %[[ARG:.*]] = arith.constant 0 : i64
// CHECK-NEXT:   func.call @dhir_rt_shard_read_box(%{{.*}}, %{{.*}}, %[[ARG]]) : (i64, i64, i64) -> ()
// CHECK:        %[[WHOLE:.*]] = memref.alloc() : memref<4x3xf32>
// CHECK:        %[[RES:.*]] = arith.constant 1 : i64
// CHECK-NEXT:   func.call @dhir_rt_shard_write_box(%{{.*}}, %{{.*}}, %[[RES]]) : (i64, i64, i64) -> ()
// CHECK-NOT:    memref.copy
// CHECK-NOT:    dhir_rt_shard_all_
// CHECK:        func.return
// CHECK:      func.func @used(%a: memref<2x3xf32>, %out: memref<4x3xf32>) attributes {dhir.spmd} {
// CHECK:        func.call @dhir_rt_shard_all_gather(
// CHECK-NEXT:   memref.copy %{{.*}}, %out
// CHECK-DAG:  func.func private @dhir_rt_shard_read_box(i64, i64, i64) -> ()
// CHECK-DAG:  func.func private @dhir_rt_shard_write_box(i64, i64, i64) -> ()
