// dhir-codedrop wraps a plain function's loop nests, linalg ops and calls in tasks.
// RUN: dhir-opt %s --split-input-file -p dhir-codedrop | filecheck %s
// RUN: dhir-opt %s --split-input-file -p 'dhir-codedrop{target="cpu"}' | filecheck %s --check-prefix=CPU
// RUN: not dhir-opt %s --split-input-file -p 'dhir-codedrop{target="x86_65"}' 2>&1 | filecheck %s --check-prefix=BAD

// Two nests with no host code between them share a schedule (its operands are the union);
// a constant between them moves before it; scalars (%n, %two) are used directly.
// CHECK-LABEL: func.func @two_nests(%a: memref<8xi32>, %b: memref<8xi32>, %n: index)
// CHECK:         %two = arith.constant 2 : i32
// CHECK-NEXT:    dhir.schedule %a, %b {
// CHECK-NEXT:      %any = dhir.target {kind = "any"}
// CHECK-NEXT:      %{{.*}} = dhir.task %any, %a, %b {
// CHECK-NEXT:        scf.for
// CHECK:           %{{.*}} = dhir.task %any, %b, %a {
// CHECK-NEXT:        scf.parallel (%{{.*}}) = (%c0) to (%n) step (%c1) {
// CHECK:               arith.muli %{{.*}}, %two : i32
// CHECK:         func.return
// CPU:           %cpu = dhir.target {kind = "cpu"}
// BAD: error: dhir-codedrop: bad target 'x86_65': unknown arch "x86_65"
func.func @two_nests(%a: memref<8xi32>, %b: memref<8xi32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %a[%i] : memref<8xi32>
    memref.store %v, %b[%i] : memref<8xi32>
  }
  %two = arith.constant 2 : i32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %v = memref.load %b[%i] : memref<8xi32>
    %w = arith.muli %v, %two : i32
    memref.store %w, %a[%i] : memref<8xi32>
    scf.reduce
  }
  return
}

// -----

// Host code (a load and a store) splits the nests into two schedules; the call on a
// memref is a task of its own schedule too, while the call on a scalar stays host code.
// CHECK-LABEL: func.func @host_between(%a: memref<8xi32>, %b: memref<8xi32>)
// CHECK:         dhir.schedule %a, %b {
// CHECK:           dhir.task %any, %a, %b {
// CHECK:         %x = memref.load %a[%c0] : memref<8xi32>
// CHECK-NEXT:    memref.store %x, %b[%c1] : memref<8xi32>
// CHECK-NEXT:    dhir.schedule %b, %a {
// CHECK:           dhir.task %any{{.*}}, %b, %a {
// CHECK:           dhir.task %any{{.*}}, %a {
// CHECK-NEXT:        func.call @ext(%a) : (memref<8xi32>) -> ()
// CHECK:         func.call @record(%c0) : (index) -> ()
func.func @host_between(%a: memref<8xi32>, %b: memref<8xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  affine.for %i = 0 to 8 {
    %v = affine.load %a[%i] : memref<8xi32>
    affine.store %v, %b[%i] : memref<8xi32>
  }
  %x = memref.load %a[%c0] : memref<8xi32>
  memref.store %x, %b[%c1] : memref<8xi32>
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %b[%i] : memref<8xi32>
    memref.store %v, %a[%i] : memref<8xi32>
  }
  func.call @ext(%a) : (memref<8xi32>) -> ()
  func.call @record(%c0) : (index) -> ()
  return
}
func.func private @ext(memref<8xi32>)
func.func private @record(index)

// -----

// A time loop (an outer loop around two nests) stays a host loop around a schedule of
// its body; the row view made before it is made again in each task, which lists %c.
// CHECK-LABEL: func.func @time_loop(%b: memref<8xi32>, %c: memref<8x8xi32>)
// CHECK-NOT:     memref.subview
// CHECK:         scf.for %t = %c0 to %c8 step %c1 {
// CHECK-NEXT:      dhir.schedule %b, %c {
// CHECK:             dhir.task %any, %b, %c {
// CHECK-NEXT:          %row{{.*}} = memref.subview %c[1, 0] [1, 8] [1, 1]
// CHECK:             dhir.task %any{{.*}}, %c, %b {
// CHECK-NEXT:          %row{{.*}} = memref.subview %c[1, 0] [1, 8] [1, 1]
func.func @time_loop(%b: memref<8xi32>, %c: memref<8x8xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %row = memref.subview %c[1, 0] [1, 8] [1, 1] : memref<8x8xi32> to memref<8xi32, strided<[1], offset: 8>>
  scf.for %t = %c0 to %c8 step %c1 {
    scf.for %i = %c1 to %c8 step %c1 {
      %p = arith.subi %i, %c1 : index
      %v = memref.load %b[%p] : memref<8xi32>
      memref.store %v, %row[%i] : memref<8xi32, strided<[1], offset: 8>>
    }
    scf.for %i = %c0 to %c8 step %c1 {
      %v = memref.load %row[%i] : memref<8xi32, strided<[1], offset: 8>>
      memref.store %v, %b[%i] : memref<8xi32>
    }
  }
  return
}

// -----

// A perfect nest whose outer counter is a subscript (gemm's rows) is one task; a linalg
// op is a task; a loop whose result is used stays host code.
// CHECK-LABEL: func.func @gemm
// CHECK:         dhir.schedule %A, %B, %C {
// CHECK:           dhir.task %any, %A, %B, %C {
// CHECK-NEXT:        scf.for %i
// CHECK:           dhir.task %any{{.*}}, %C {
// CHECK-NEXT:        linalg.fill
// CHECK:         %sum = scf.for
// CHECK-NOT:     dhir.task
func.func @gemm(%A: memref<4x4xi32>, %B: memref<4x4xi32>, %C: memref<4x4xi32>, %z: i32) -> i32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = arith.constant 4 : index
  scf.for %i = %c0 to %n step %c1 {
    scf.for %j = %c0 to %n step %c1 {
      scf.for %k = %c0 to %n step %c1 {
        %a = memref.load %A[%i, %k] : memref<4x4xi32>
        %b = memref.load %B[%k, %j] : memref<4x4xi32>
        %c = memref.load %C[%i, %j] : memref<4x4xi32>
        %p = arith.muli %a, %b : i32
        %s = arith.addi %c, %p : i32
        memref.store %s, %C[%i, %j] : memref<4x4xi32>
      }
    }
  }
  linalg.fill ins(%z : i32) outs(%C : memref<4x4xi32>)
  %sum = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %z) -> (i32) {
    %v = memref.load %A[%i, %i] : memref<4x4xi32>
    %s = arith.addi %acc, %v : i32
    scf.yield %s : i32
  }
  return %sum : i32
}

// -----

// A function that already has a schedule is left as it is.
// CHECK-LABEL: func.func @written
// CHECK-NEXT:    dhir.schedule %a {
// CHECK-NEXT:      %cpu = dhir.target {arch = "x86_64"}
func.func @written(%a: memref<4xf32>) {
  dhir.schedule %a {
    %cpu = dhir.target {arch = "x86_64"}
    %t = dhir.task %cpu, %a {}
  }
  return
}

// -----

// An outer loop around two nests whose iterations touch disjoint rows (gemm as PolyBench
// writes it: scale row i of C, then add A[i, k] * B[k, :]) carries no dependence: it is
// one task, which dhir-split can cut by rows; it is not a time loop.
// CHECK-LABEL: func.func @rows(%A: memref<4x3xf64>, %B: memref<3x5xf64>, %C: memref<4x5xf64>)
// CHECK:         dhir.schedule %C, %A, %B {
// CHECK:           dhir.task %any, %C, %A, %B {
// CHECK-NEXT:        scf.for %i = %c0 to %c4 step %c1 {
// CHECK-NEXT:          scf.for %j = %c0 to %c5 step %c1 {
// CHECK:               scf.for %k = %c0 to %c3 step %c1 {
// CHECK-NEXT:            scf.for %j{{.*}} = %c0 to %c5 step %c1 {
// CHECK-NOT:       dhir.task
// CHECK:         return
func.func @rows(%A: memref<4x3xf64>, %B: memref<3x5xf64>, %C: memref<4x5xf64>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %beta = arith.constant 1.5 : f64
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %j = %c0 to %c5 step %c1 {
      %c = memref.load %C[%i, %j] : memref<4x5xf64>
      %s = arith.mulf %c, %beta : f64
      memref.store %s, %C[%i, %j] : memref<4x5xf64>
    }
    scf.for %k = %c0 to %c3 step %c1 {
      scf.for %j = %c0 to %c5 step %c1 {
        %a = memref.load %A[%i, %k] : memref<4x3xf64>
        %b = memref.load %B[%k, %j] : memref<3x5xf64>
        %c = memref.load %C[%i, %j] : memref<4x5xf64>
        %p = arith.mulf %a, %b : f64
        %s = arith.addf %c, %p : f64
        memref.store %s, %C[%i, %j] : memref<4x5xf64>
      }
    }
  }
  return
}
