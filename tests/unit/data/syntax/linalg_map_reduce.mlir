// linalg.map and linalg.reduce as MLIR 22 writes them: short forms `{ op }`, bodies with
// the init's element (map) and several inputs and inits (reduce), attributes, tensors.

func.func @map(%a: memref<4x3xf64>, %b: memref<4x3xf64>, %c: memref<4x3xf64>,
               %i: memref<4x3xi32>) {
  linalg.map ins(%a, %b : memref<4x3xf64>, memref<4x3xf64>) outs(%c : memref<4x3xf64>)
    (%x: f64, %y: f64, %o: f64) {
      %s = arith.subf %y, %x : f64
      linalg.yield %s : f64
    }
  linalg.map { arith.addf } ins(%a, %b : memref<4x3xf64>, memref<4x3xf64>) outs(%c : memref<4x3xf64>)
  linalg.map { arith.mulf {fastmath = #arith.fastmath<fast>} } ins(%a, %b : memref<4x3xf64>, memref<4x3xf64>) outs(%c : memref<4x3xf64>) {note}
  linalg.map { math.absf } ins(%a : memref<4x3xf64>) outs(%c : memref<4x3xf64>)
  linalg.map { arith.sitofp } ins(%i : memref<4x3xi32>) outs(%c : memref<4x3xf64>)
  linalg.map outs(%c : memref<4x3xf64>)
    (%o: f64) {
      %z = arith.constant 0.0 : f64
      linalg.yield %z : f64
    }
  linalg.map ins(%a : memref<4x3xf64>) outs(%c : memref<4x3xf64>)
    (%x: f64, %o: f64) {
      %j = linalg.index 1 : index
      %k = arith.index_cast %j : index to i64
      %f = arith.sitofp %k : i64 to f64
      %s = arith.addf %x, %o : f64
      %t = arith.addf %s, %f : f64
      linalg.yield %t : f64
    }
  return
}

func.func @reduce(%a: memref<4x6xf32>, %b: memref<4x6xi32>, %o: memref<4xf32>,
                  %p: memref<4xi32>, %q: memref<6xf64>) {
  linalg.reduce ins(%a, %b : memref<4x6xf32>, memref<4x6xi32>) outs(%o, %p : memref<4xf32>, memref<4xi32>) dimensions = [1]
    (%x: f32, %y: i32, %ox: f32, %oy: i32) {
      %s = arith.addf %x, %ox : f32
      %t = arith.maxsi %y, %oy : i32
      linalg.yield %s, %t : f32, i32
    }
  linalg.reduce { arith.addf } ins(%a : memref<4x6xf32>) outs(%o : memref<4xf32>) dimensions = [1]
  linalg.reduce ins(%a : memref<4x6xf32>) outs(%o : memref<4xf32>) dimensions = [1] {note}
    (%x: f32, %ox: f32) {
      %s = arith.addf %x, %ox : f32
      linalg.yield %s : f32
    }
  linalg.reduce ins(%a : memref<4x6xf32>) outs(%q : memref<6xf64>) dimensions = [0]
    (%x: f32, %ox: f64) {
      %e = arith.extf %x : f32 to f64
      %s = arith.addf %ox, %e : f64
      linalg.yield %s : f64
    }
  return
}

func.func @on_tensors(%a: tensor<4x6xf32>, %o: tensor<6xf32>, %b: tensor<4x6xf32>,
                      %p: tensor<6xf32>) -> (tensor<6xf32>, tensor<6xf32>, tensor<4x6xf32>) {
  %r:2 = linalg.reduce ins(%a, %b : tensor<4x6xf32>, tensor<4x6xf32>) outs(%o, %p : tensor<6xf32>, tensor<6xf32>) dimensions = [0]
    (%x: f32, %y: f32, %ox: f32, %oy: f32) {
      %s = arith.addf %x, %ox : f32
      %t = arith.mulf %y, %oy : f32
      linalg.yield %s, %t : f32, f32
    }
  %m = linalg.map { arith.maximumf } ins(%a, %b : tensor<4x6xf32>, tensor<4x6xf32>) outs(%b : tensor<4x6xf32>)
  return %r#0, %r#1, %m : tensor<6xf32>, tensor<6xf32>, tensor<4x6xf32>
}
