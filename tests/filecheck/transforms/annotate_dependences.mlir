// What each kind of op reads and writes, and the hazards that order tasks.
// Schedule operand positions: %a = 0, %b = 1, %c = 2, %d = 3.
// RUN: dhir-opt %s -p dhir-annotate-dependences | filecheck %s

func.func private @opaque(memref<8xf32>)

func.func @f(%a: memref<8xf32>, %b: memref<8xf32>, %c: memref<8x8xf32>, %d: memref<8xf32>) {
  dhir.schedule %a, %b, %c, %d {
    %cpu = dhir.target {arch = "x86_64"}
    %gpu = dhir.target {arch = "sm_90"}
    // CHECK: %copy = dhir.task %cpu, %a, %b attributes {dhir.id = 0 : i64, dhir.reads = array<i64: 0>, dhir.writes = array<i64: 1>, dhir.read_regions = ["{ [x0] : 0 <= x0 <= 7 }"], dhir.write_regions = ["must { [x0] : 0 <= x0 <= 7 }"], dhir.after = array<i64>}
    %copy = dhir.task %cpu, %a, %b {
      memref.copy %a, %b : memref<8xf32> to memref<8xf32>
    }
    // A store through a view writes the viewed buffer (RAW on nothing, WAW none yet).
    // CHECK: %view = dhir.task %cpu, %c attributes {dhir.id = 1 : i64, dhir.reads = array<i64>, dhir.writes = array<i64: 2>, dhir.read_regions = [], dhir.write_regions = ["must { [x0 = 0, x1 = 0] }"], dhir.after = array<i64>}
    %view = dhir.task %cpu, %c {
      %row = memref.subview %c[0, 0] [1, 8] [1, 1] : memref<8x8xf32> to memref<8xf32, strided<[1]>>
      %c0 = arith.constant 0 : index
      %x = arith.constant 1.0 : f32
      memref.store %x, %row[%c0] : memref<8xf32, strided<[1]>>
    }
    // A call may do anything with what it is given: read and write %b.
    // CHECK: %call = dhir.task %cpu, %b attributes {dhir.id = 2 : i64, dhir.reads = array<i64: 1>, dhir.writes = array<i64: 1>, dhir.read_regions = ["{ [x0] : 0 <= x0 <= 7 }"], dhir.write_regions = ["may { [x0] : 0 <= x0 <= 7 }"], dhir.after = array<i64: 0>}
    %call = dhir.task %cpu, %b {
      func.call @opaque(%b) : (memref<8xf32>) -> ()
    }
    // linalg: ins are read, outs read and written. Writing %a after task 0 read it: WAR.
    // CHECK: %lin = dhir.task %cpu, %b, %a attributes {dhir.id = 3 : i64, dhir.reads = array<i64: 0, 1>, dhir.writes = array<i64: 0>, dhir.read_regions = ["{ [x0] : 0 <= x0 <= 7 }", "{ [x0] : 0 <= x0 <= 7 }"], dhir.write_regions = ["must { [x0] : 0 <= x0 <= 7 }"], dhir.after = array<i64: 0, 2>}
    %lin = dhir.task %cpu, %b, %a {
      linalg.add ins(%b, %a : memref<8xf32>, memref<8xf32>) outs(%a : memref<8xf32>)
    }
    // Loads inside a gpu.launch body count; %d is only written: no order with anything.
    // CHECK: %kernel = dhir.task %gpu, %c, %d attributes {dhir.id = 4 : i64, dhir.reads = array<i64: 2>, dhir.writes = array<i64: 3>, dhir.read_regions = ["{ [x0, x1] : 0 <= x0 <= 7 and 0 <= x1 <= 7 }"], dhir.write_regions = ["may { [x0] : 0 <= x0 <= 7 }"], dhir.after = array<i64: 1>}
    %kernel = dhir.task %gpu, %c, %d {
      %c1 = arith.constant 1 : index
      %c8 = arith.constant 8 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c1, %sz = %c1) {
        %v = memref.load %c[%tx, %tx] : memref<8x8xf32>
        memref.store %v, %d[%tx] : memref<8xf32>
        gpu.terminator
      }
    }
    // Writing %d again: WAW with task 4.
    // CHECK: %again = dhir.task %cpu, %d attributes {dhir.id = 5 : i64, dhir.reads = array<i64>, dhir.writes = array<i64: 3>, dhir.read_regions = [], dhir.write_regions = ["must { [x0 = 0] }"], dhir.after = array<i64: 4>}
    %again = dhir.task %cpu, %d {
      %c0 = arith.constant 0 : index
      %x = arith.constant 2.0 : f32
      affine.store %x, %d[%c0] : memref<8xf32>
    }
  }
  return
}
