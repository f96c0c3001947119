func.func @forall(%n: index, %m: memref<?x8xf32>, %a: memref<10xf32>, %c: f32, %i0: index,
                  %t: tensor<8xf32>) -> tensor<8xf32> {
  scf.forall (%i, %j) in (%n, 8) {
    memref.store %c, %m[%i, %j] : memref<?x8xf32>
  }
  scf.forall (%i) = (0) to (%n) step (2) {
    memref.store %c, %a[%i] : memref<10xf32>
  } {mapping = [#gpu.thread<x>]}
  scf.forall (%i, %j) = (%i0, -1) to (%n, 8) step (%i0, 3) {
    scf.forall.in_parallel {
    }
  } {note = "kept"}
  scf.forall (%i) in (4) {
    scf.forall (%j) = (%i) to (8) step (%i0) {
      memref.store %c, %m[%i, %j] : memref<?x8xf32>
    }
  }
  %r = scf.forall (%i) in (8) shared_outs(%o = %t) -> (tensor<8xf32>) {
    %s = "tensor.extract_slice"(%o, %i) <{operandSegmentSizes = array<i32: 1, 1, 0, 0>, static_offsets = array<i64: -9223372036854775808>, static_sizes = array<i64: 1>, static_strides = array<i64: 1>}> : (tensor<8xf32>, index) -> tensor<1xf32>
    scf.forall.in_parallel {
      "tensor.parallel_insert_slice"(%s, %o, %i) <{operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>, static_offsets = array<i64: -9223372036854775808>, static_sizes = array<i64: 1>, static_strides = array<i64: 1>}> : (tensor<1xf32>, tensor<8xf32>, index) -> ()
    }
  }
  return %r : tensor<8xf32>
}

func.func @atomic(%a: memref<10xf32>, %b: memref<4x?xi32>, %c: f32, %i: index, %j: index) -> (f32, i32) {
  %x = memref.generic_atomic_rmw %a[%i] : memref<10xf32> {
  ^bb0(%cur: f32):
    %s = arith.addf %cur, %c : f32
    memref.atomic_yield %s : f32
  }
  %y = memref.generic_atomic_rmw %b[%i, %j] : memref<4x?xi32> {
  ^bb0(%cur: i32):
    %k = arith.constant 3 : i32
    %p = arith.muli %cur, %k : i32
    memref.atomic_yield %p : i32
  } {note}
  %z = memref.generic_atomic_rmw %a[%j] : memref<10xf32> {
  ^bb0(%cur: f32):
    memref.atomic_yield %c : f32
  }
  return %x, %y : f32, i32
}
