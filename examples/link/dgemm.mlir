// C = A * B through OpenBLAS's cblas_dgemm, as NumPy's wheel ships it (64-bit integers,
// symbols `scipy_cblas_<name>64_`): two tasks, each computing 16 rows of C. Memrefs go to
// BLAS as bare pointers (extract_aligned_pointer_as_index, as i64); a row block starts
// rows * 32 * 8 bytes further. CblasRowMajor = 101, CblasNoTrans = 111.
func.func private @scipy_cblas_dgemm64_(i32, i32, i32, i64, i64, i64, f64, i64, i64, i64, i64, f64, i64, i64)

func.func @main(%a: memref<32x32xf64>, %b: memref<32x32xf64>, %c: memref<32x32xf64>) {
  dhir.schedule %a, %b, %c {
    %cpu = dhir.target {kind = "cpu"}
    %top = dhir.task %cpu, %a, %b, %c {
      %first = arith.constant 0 : i64
      func.call @rows(%a, %b, %c, %first) : (memref<32x32xf64>, memref<32x32xf64>, memref<32x32xf64>, i64) -> ()
    }
    %bottom = dhir.task %cpu, %a, %b, %c {
      %first = arith.constant 16 : i64
      func.call @rows(%a, %b, %c, %first) : (memref<32x32xf64>, memref<32x32xf64>, memref<32x32xf64>, i64) -> ()
    }
  }
  return
}

// C[first:first+16] = A[first:first+16] * B.
func.func @rows(%a: memref<32x32xf64>, %b: memref<32x32xf64>, %c: memref<32x32xf64>, %first: i64) {
  %pa = memref.extract_aligned_pointer_as_index %a : memref<32x32xf64> -> index
  %pb = memref.extract_aligned_pointer_as_index %b : memref<32x32xf64> -> index
  %pc = memref.extract_aligned_pointer_as_index %c : memref<32x32xf64> -> index
  %ia = arith.index_cast %pa : index to i64
  %ib = arith.index_cast %pb : index to i64
  %ic = arith.index_cast %pc : index to i64
  %row_bytes = arith.constant 256 : i64
  %skip = arith.muli %first, %row_bytes : i64
  %a_rows = arith.addi %ia, %skip : i64
  %c_rows = arith.addi %ic, %skip : i64
  %major = arith.constant 101 : i32
  %no = arith.constant 111 : i32
  %m = arith.constant 16 : i64
  %n = arith.constant 32 : i64
  %one = arith.constant 1.0 : f64
  %zero = arith.constant 0.0 : f64
  func.call @scipy_cblas_dgemm64_(%major, %no, %no, %m, %n, %n, %one, %a_rows, %n, %ib, %n, %zero, %c_rows, %n) : (i32, i32, i32, i64, i64, i64, f64, i64, i64, i64, i64, f64, i64, i64) -> ()
  return
}
