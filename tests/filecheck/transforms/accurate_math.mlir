// dhir-accurate-math: math.expm1 and math.log1p become calls of libm (MLIR 22 would expand
// them to exp(x) - 1 and log(1 + x)); f16 goes through f32, vectors lane by lane, GPU
// kernels keep theirs (libdevice's are accurate), in a gpu.module or a gpu.launch body,
// and a declaration is reused.
// RUN: dhir-opt %s -p dhir-accurate-math | filecheck %s
// RUN: dhir-opt %s -p dhir-accurate-math | mlir-opt-22 > /dev/null

// CHECK:      func.func private @expm1f(f32) -> f32
// CHECK-NEXT: func.func private @log1p(f64) -> f64
func.func private @log1p(f64) -> f64

// CHECK-LABEL: func.func @f
func.func @f(%x: f64, %h: f16, %v: vector<2xf32>) -> (f64, f16, vector<2xf32>) {
  // CHECK: %y = func.call @log1p(%x) : (f64) -> f64
  %y = math.log1p %x : f64
  // CHECK:      %[[W:.*]] = arith.extf %h : f16 to f32
  // CHECK-NEXT: %[[E:.*]] = func.call @expm1f(%[[W]]) : (f32) -> f32
  // CHECK-NEXT: %{{.*}} = arith.truncf %[[E]] : f32 to f16
  %g = math.expm1 %h : f16
  // CHECK:      %[[Z:.*]] = arith.constant dense<0.000000e+00> : vector<2xf32>
  // CHECK-NEXT: %[[A:.*]] = vector.extract %v[0] : f32 from vector<2xf32>
  // CHECK-NEXT: %[[B:.*]] = func.call @expm1f(%[[A]]) : (f32) -> f32
  // CHECK-NEXT: %[[C:.*]] = vector.insert %[[B]], %[[Z]] [0] : f32 into vector<2xf32>
  // CHECK-NEXT: %[[D:.*]] = vector.extract %v[1] : f32 from vector<2xf32>
  // CHECK-NEXT: %[[F:.*]] = func.call @expm1f(%[[D]]) : (f32) -> f32
  // CHECK-NEXT: %{{.*}} = vector.insert %[[F]], %[[C]] [1] : f32 into vector<2xf32>
  %w = math.expm1 %v : vector<2xf32>
  return %y, %g, %w : f64, f16, vector<2xf32>
}

// CHECK-LABEL: gpu.module @kernels
gpu.module @kernels {
  gpu.func @k(%x: f32) kernel {
    // CHECK: math.expm1 %x : f32
    %y = math.expm1 %x : f32
    gpu.return
  }
}

// CHECK-LABEL: func.func @launch
func.func @launch(%x: f32) {
  %c1 = arith.constant 1 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    // CHECK: math.log1p %x : f32
    %y = math.log1p %x : f32
    gpu.terminator
  }
  return
}

// fpowi on vectors with exponents up to i32: lane by lane (MLIR 22 would give LLVM's powi a
// vector exponent), narrow ones sign-extended; i64 ones are left to convert-math-to-funcs.
// CHECK-LABEL: func.func @powers
func.func @powers(%x: vector<2xf32>, %n: vector<2xi16>, %w: vector<2xi64>) -> (vector<2xf32>, vector<2xf32>) {
  // CHECK:      %[[Z:.*]] = arith.constant dense<0.000000e+00> : vector<2xf32>
  // CHECK-NEXT: %[[X0:.*]] = vector.extract %x[0] : f32 from vector<2xf32>
  // CHECK-NEXT: %[[N0:.*]] = vector.extract %n[0] : i16 from vector<2xi16>
  // CHECK-NEXT: %[[E0:.*]] = arith.extsi %[[N0]] : i16 to i32
  // CHECK-NEXT: %[[P0:.*]] = math.fpowi %[[X0]], %[[E0]] fastmath<nnan> : f32, i32
  // CHECK-NEXT: %[[V0:.*]] = vector.insert %[[P0]], %[[Z]] [0] : f32 into vector<2xf32>
  // CHECK-NEXT: %[[X1:.*]] = vector.extract %x[1] : f32 from vector<2xf32>
  // CHECK-NEXT: %[[N1:.*]] = vector.extract %n[1] : i16 from vector<2xi16>
  // CHECK-NEXT: %[[E1:.*]] = arith.extsi %[[N1]] : i16 to i32
  // CHECK-NEXT: %[[P1:.*]] = math.fpowi %[[X1]], %[[E1]] fastmath<nnan> : f32, i32
  // CHECK-NEXT: %{{.*}} = vector.insert %[[P1]], %[[V0]] [1] : f32 into vector<2xf32>
  %y = math.fpowi %x, %n fastmath<nnan> : vector<2xf32>, vector<2xi16>
  // CHECK: math.fpowi %x, %w : vector<2xf32>, vector<2xi64>
  %u = math.fpowi %x, %w : vector<2xf32>, vector<2xi64>
  return %y, %u : vector<2xf32>, vector<2xf32>
}

// maxnumf/minnumf: maximumf/minimumf (which order -0 below +0) where neither is NaN, else
// the other operand; an op that allows nsz keeps llvm.maxnum.
// CHECK-LABEL: func.func @numbers
func.func @numbers(%a: f32, %b: f32, %v: vector<2xf64>) -> (f32, f32, vector<2xf64>) {
  // CHECK-NEXT: %[[M:.*]] = arith.maximumf %a, %b : f32
  // CHECK-NEXT: %[[AN:.*]] = arith.cmpf uno, %a, %a : f32
  // CHECK-NEXT: %[[BN:.*]] = arith.cmpf uno, %b, %b : f32
  // CHECK-NEXT: %[[K:.*]] = arith.select %[[BN]], %a, %[[M]] : f32
  // CHECK-NEXT: %{{.*}} = arith.select %[[AN]], %b, %[[K]] : f32
  %h = arith.maxnumf %a, %b : f32
  // CHECK-NEXT: %{{.*}} = arith.minnumf %a, %b fastmath<nsz> : f32
  %l = arith.minnumf %a, %b fastmath<nsz> : f32
  // CHECK-NEXT: %[[W:.*]] = arith.minimumf %v, %v : vector<2xf64>
  // CHECK:      arith.select %{{.*}}, %v, %[[W]] : vector<2xi1>, vector<2xf64>
  %w = arith.minnumf %v, %v : vector<2xf64>
  return %h, %l, %w : f32, f32, vector<2xf64>
}

// vector.reduction <maxnumf>/<minnumf>: the interpreter's chain of maxnumf/minnumf in lane
// order (from the accumulator), each as above; one that allows nsz keeps LLVM's reduction.
// CHECK-LABEL: func.func @number_reductions
func.func @number_reductions(%v: vector<2xf32>, %acc: f32) -> (f32, f32, f32) {
  // CHECK-NEXT: %[[X0:.*]] = vector.extract %v[0] : f32 from vector<2xf32>
  // CHECK-NEXT: %[[X1:.*]] = vector.extract %v[1] : f32 from vector<2xf32>
  // CHECK-NEXT: %[[M:.*]] = arith.maximumf %[[X0]], %[[X1]] : f32
  // CHECK:      %[[R:.*]] = arith.select %{{.*}}, %[[X1]], %{{.*}} : f32
  %r = vector.reduction <maxnumf>, %v : vector<2xf32> into f32
  // CHECK-NEXT: %[[Y0:.*]] = vector.extract %v[0] : f32 from vector<2xf32>
  // CHECK-NEXT: %[[Y1:.*]] = vector.extract %v[1] : f32 from vector<2xf32>
  // CHECK-NEXT: %[[N:.*]] = arith.minimumf %acc, %[[Y0]] : f32
  // CHECK:      %[[S:.*]] = arith.minimumf %{{.*}}, %[[Y1]] : f32
  %s = vector.reduction <minnumf>, %v, %acc : vector<2xf32> into f32
  // CHECK:      vector.reduction <maxnumf>, %v fastmath<nsz> : vector<2xf32> into f32
  %t = vector.reduction <maxnumf>, %v fastmath<nsz> : vector<2xf32> into f32
  return %r, %s, %t : f32, f32, f32
}

// vector.mask around a float maximum or minimum reduction: the reduction of a select of the
// kind's neutral value (MLIR 22 fills the lanes off with -1.4e-45 and 3.4e38); other
// masked reductions keep their mask (LLVM's vp reductions get them right).
// CHECK-LABEL: func.func @masked_min_max
func.func @masked_min_max(%v: vector<4xf32>, %m: vector<4xi1>, %acc: f32) -> (f32, f32, f32) {
  // CHECK-NEXT: %[[NI:.*]] = arith.constant dense<0xff800000> : vector<4xf32>
  // CHECK-NEXT: %[[XS:.*]] = arith.select %m, %v, %[[NI]] : vector<4xi1>, vector<4xf32>
  // CHECK-NEXT: %[[X:.*]] = vector.reduction <maximumf>, %[[XS]] : vector<4xf32> into f32
  %x = vector.mask %m { vector.reduction <maximumf>, %v : vector<4xf32> into f32 } : vector<4xi1> -> f32
  // CHECK-NEXT: %[[PI:.*]] = arith.constant dense<0x7f800000> : vector<4xf32>
  // CHECK-NEXT: %[[YS:.*]] = arith.select %m, %v, %[[PI]] : vector<4xi1>, vector<4xf32>
  // CHECK-NEXT: %[[Y:.*]] = vector.reduction <minimumf>, %[[YS]], %acc : vector<4xf32> into f32
  %y = vector.mask %m { vector.reduction <minimumf>, %v, %acc : vector<4xf32> into f32 } : vector<4xi1> -> f32
  // CHECK-NEXT: vector.mask %m {
  // CHECK-NEXT:   vector.reduction <add>, %v : vector<4xf32> into f32
  %z = vector.mask %m { vector.reduction <add>, %v : vector<4xf32> into f32 } : vector<4xi1> -> f32
  return %x, %y, %z : f32, f32, f32
}
