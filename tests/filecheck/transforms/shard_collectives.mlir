// After bufferization, a call of a collective stub becomes a buffer for its result and the
// runtime call, given the addresses of the grid's words (a constant global), its input
// and that buffer; the stub goes, and the runtime function is declared.
// RUN: dhir-opt %s -p dhir-shard-collectives | filecheck %s

func.func private @__dhir_collective0(memref<2x3xf32>) -> memref<4x3xf32> attributes {dhir.collective = {grid = array<i64: 1, 2, 1, 0>, calls = {"0:dhir_rt_shard_all_gather" = array<i64: 1, 24>}}}
func.func @main(%a: memref<2x3xf32>, %out: memref<4x3xf32>) {
  %g = func.call @__dhir_collective0(%a) : (memref<2x3xf32>) -> memref<4x3xf32>
  memref.copy %g, %out : memref<4x3xf32> to memref<4x3xf32>
  func.return
}

// CHECK:      memref.global "private" constant @__dhir_grid0 : memref<4xi64> = dense<[1, 2, 1, 0]>
// CHECK-NOT:  @__dhir_collective0
// CHECK:      %[[BUFFER:.*]] = memref.alloc() : memref<4x3xf32>
// CHECK-NEXT: %[[WORDS:.*]] = memref.get_global @__dhir_grid0 : memref<4xi64>
// CHECK:      func.call @dhir_rt_shard_all_gather(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (i64, i64, i64, i64, i64) -> ()
// CHECK-NEXT: memref.copy %[[BUFFER]], %out : memref<4x3xf32> to memref<4x3xf32>
// CHECK:      func.func private @dhir_rt_shard_all_gather(i64, i64, i64, i64, i64) -> ()
