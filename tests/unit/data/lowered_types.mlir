// Every argument type the harness passes: each scalar is stored into element 1 of the memref
// before it, element 0 is doubled (negated for i1); %d0 is 0-d and %dyn has a dynamic middle dim.
// The same on every rank; no MPI ops.
module {
  func.func @main(%mb: memref<3xi1>, %b: i1, %m8: memref<3xi8>, %s8: i8, %m16: memref<3xi16>, %s16: i16,
                  %m32: memref<3xi32>, %s32: i32, %m64: memref<3xi64>, %s64: i64,
                  %mx: memref<3xindex>, %sx: index, %mh: memref<3xf16>, %h: f16,
                  %mf: memref<3xf32>, %f: f32, %md: memref<3xf64>, %d: f64,
                  %d0: memref<f64>, %dyn: memref<2x?x3xi32>) attributes {llvm.emit_c_interface} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %true = arith.constant true
    %vb = memref.load %mb[%c0] : memref<3xi1>
    %nb = arith.xori %vb, %true : i1
    memref.store %nb, %mb[%c0] : memref<3xi1>
    memref.store %b, %mb[%c1] : memref<3xi1>
    %v8 = memref.load %m8[%c0] : memref<3xi8>
    %w8 = arith.addi %v8, %v8 : i8
    memref.store %w8, %m8[%c0] : memref<3xi8>
    memref.store %s8, %m8[%c1] : memref<3xi8>
    %v16 = memref.load %m16[%c0] : memref<3xi16>
    %w16 = arith.addi %v16, %v16 : i16
    memref.store %w16, %m16[%c0] : memref<3xi16>
    memref.store %s16, %m16[%c1] : memref<3xi16>
    %v32 = memref.load %m32[%c0] : memref<3xi32>
    %w32 = arith.addi %v32, %v32 : i32
    memref.store %w32, %m32[%c0] : memref<3xi32>
    memref.store %s32, %m32[%c1] : memref<3xi32>
    %v64 = memref.load %m64[%c0] : memref<3xi64>
    %w64 = arith.addi %v64, %v64 : i64
    memref.store %w64, %m64[%c0] : memref<3xi64>
    memref.store %s64, %m64[%c1] : memref<3xi64>
    %vx = memref.load %mx[%c0] : memref<3xindex>
    %wx = arith.addi %vx, %vx : index
    memref.store %wx, %mx[%c0] : memref<3xindex>
    memref.store %sx, %mx[%c1] : memref<3xindex>
    %vh = memref.load %mh[%c0] : memref<3xf16>
    %wh = arith.addf %vh, %vh : f16
    memref.store %wh, %mh[%c0] : memref<3xf16>
    memref.store %h, %mh[%c1] : memref<3xf16>
    %vf = memref.load %mf[%c0] : memref<3xf32>
    %wf = arith.addf %vf, %vf : f32
    memref.store %wf, %mf[%c0] : memref<3xf32>
    memref.store %f, %mf[%c1] : memref<3xf32>
    %vd = memref.load %md[%c0] : memref<3xf64>
    %wd = arith.addf %vd, %vd : f64
    memref.store %wd, %md[%c0] : memref<3xf64>
    memref.store %d, %md[%c1] : memref<3xf64>
    %v0 = memref.load %d0[] : memref<f64>
    %w0 = arith.addf %v0, %d : f64
    memref.store %w0, %d0[] : memref<f64>
    // dyn[i, j, k] += i * 100 + j * 10 + k
    %n = memref.dim %dyn, %c1 : memref<2x?x3xi32>
    scf.for %i = %c0 to %c2 step %c1 {
      scf.for %j = %c0 to %n step %c1 {
        scf.for %k = %c0 to %c3 step %c1 {
          %c100 = arith.constant 100 : index
          %c10 = arith.constant 10 : index
          %a = arith.muli %i, %c100 : index
          %bb = arith.muli %j, %c10 : index
          %ab = arith.addi %a, %bb : index
          %abc = arith.addi %ab, %k : index
          %x = arith.index_cast %abc : index to i32
          %old = memref.load %dyn[%i, %j, %k] : memref<2x?x3xi32>
          %new = arith.addi %old, %x : i32
          memref.store %new, %dyn[%i, %j, %k] : memref<2x?x3xi32>
        }
      }
    }
    return
  }
}
