gpu.module @tensor_cores {
  gpu.func @mma(%a: memref<32x32xf16, 3>, %c: memref<16x16xf32>, %v: memref<32x4xvector<4xf32>>, %i: index) kernel {
    %x = gpu.subgroup_mma_load_matrix %a[%i, %i] {leadDimension = 32 : index} : memref<32x32xf16, 3> -> !gpu.mma_matrix<16x16xf16, "AOp">
    %y = gpu.subgroup_mma_load_matrix %a[%i, %i] {leadDimension = 32 : index, transpose} : memref<32x32xf16, 3> -> !gpu.mma_matrix<16x16xf16, "BOp">
    %zero = arith.constant 0.0 : f32
    %acc = gpu.subgroup_mma_constant_matrix %zero : !gpu.mma_matrix<16x16xf32, "COp">
    %p = gpu.subgroup_mma_compute %x, %y, %acc : !gpu.mma_matrix<16x16xf16, "AOp">, !gpu.mma_matrix<16x16xf16, "BOp"> -> !gpu.mma_matrix<16x16xf32, "COp">
    %q = gpu.subgroup_mma_compute %x, %y, %p {a_transpose, b_transpose} : !gpu.mma_matrix<16x16xf16, "AOp">, !gpu.mma_matrix<16x16xf16, "BOp"> -> !gpu.mma_matrix<16x16xf32, "COp">
    %s = gpu.subgroup_mma_elementwise addf %p, %q : (!gpu.mma_matrix<16x16xf32, "COp">, !gpu.mma_matrix<16x16xf32, "COp">) -> !gpu.mma_matrix<16x16xf32, "COp">
    %n = gpu.subgroup_mma_elementwise negatef %s {note} : (!gpu.mma_matrix<16x16xf32, "COp">) -> !gpu.mma_matrix<16x16xf32, "COp">
    %e = gpu.subgroup_mma_extract_thread_local %n[%i] : !gpu.mma_matrix<16x16xf32, "COp"> -> f32
    %m = gpu.subgroup_mma_insert_thread_local %e, %n[%i] : f32, !gpu.mma_matrix<16x16xf32, "COp"> -> !gpu.mma_matrix<16x16xf32, "COp">
    gpu.subgroup_mma_store_matrix %m, %c[%i, %i] {leadDimension = 16 : index} : !gpu.mma_matrix<16x16xf32, "COp">, memref<16x16xf32>
    %w = gpu.subgroup_mma_load_matrix %v[%i, %i] {leadDimension = 4 : index} : memref<32x4xvector<4xf32>> -> !gpu.mma_matrix<16x16xf16, "COp">
    gpu.subgroup_mma_store_matrix %w, %v[%i, %i] {leadDimension = 4 : index, transpose, note} : !gpu.mma_matrix<16x16xf16, "COp">, memref<32x4xvector<4xf32>>
    gpu.return
  }
}

func.func @sparse_async(%arg0: index) {
  %token0 = gpu.wait async
  %mem1, %token1 = gpu.alloc async [%token0] (%arg0) : memref<?xindex>
  %mem2, %token2 = gpu.alloc async [%token1] (%arg0) : memref<?xf64>
  %spmat, %token4 = gpu.create_coo async [%token2] %arg0, %arg0, %arg0, %mem1, %mem1, %mem2 : memref<?xindex>, memref<?xindex>, memref<?xf64>
  %spmat2, %token5 = gpu.create_csr async [%token4] %arg0, %arg0, %arg0, %mem1, %mem1, %mem2 : memref<?xindex>, memref<?xindex>, memref<?xf64>
  %dnvec, %token6 = gpu.create_dn_tensor async [%token5]  %mem2, %arg0 : index into memref<?xf64>
  %bufferSz, %token7 = gpu.spmv_buffer_size async [%token6] %spmat, %dnvec, %dnvec  into f64
  %token8 = gpu.spmv async [%token7] %spmat, %dnvec, %dnvec, %mem2 : memref<?xf64>  into f64
  %dnmat, %token9 = gpu.create_dn_tensor async [%token8]  %mem2, %arg0, %arg0 : index, index into memref<?xf64>
  %bufferSz2, %token10 = gpu.spmm_buffer_size async [%token9] %spmat, %dnmat, %dnmat : index into f64
  %token11 = gpu.spmm async [%token10]  %spmat, %dnmat, %dnmat, %mem2 : memref<?xf64>  into f64
  %bufferSz3, %token12 = gpu.sddmm_buffer_size async [%token11] %dnmat, %dnmat, %spmat  into f64
  %token13 = gpu.sddmm async [%token12]  %dnmat, %dnmat, %spmat, %mem2 : memref<?xf64>  into f64
  %token14 = gpu.destroy_dn_tensor async [%token13] %dnmat
  %token15 = gpu.destroy_sp_mat async [%token14] %spmat
  %token16 = gpu.destroy_dn_tensor async [%token15] %dnvec
  gpu.wait [%token16]
  return
}

func.func @sparse_modes(%spmat: !gpu.sparse.spmat_handle, %dn: !gpu.sparse.dntensor_handle, %m: memref<?xf64>, %i: index, %t: !gpu.async.token) {
  %b, %t1 = gpu.spmv_buffer_size async [%t] %spmat {TRANSPOSE}, %dn, %dn into f64
  %t2 = gpu.spmv async [%t1] %spmat {CONJUGATE_TRANSPOSE}, %dn, %dn, %m : memref<?xf64> into f32
  %bs:2 = gpu.spmm_buffer_size %spmat {TRANSPOSE}, %dn {NON_TRANSPOSE}, %dn : index, index into f64
  gpu.spmm %spmat, %dn {TRANSPOSE}, %dn, %m, %m : memref<?xf64>, memref<?xf64> into f64
  %s = gpu.sddmm_buffer_size %dn {TRANSPOSE}, %dn{TRANSPOSE}, %spmat into f64
  gpu.sddmm %dn, %dn, %spmat, %m : memref<?xf64> into f64
  %a = gpu.create_dn_tensor %m, %i : index into memref<?xf64>
  %c = gpu.create_csc %i, %i, %i, %m, %m, %m : memref<?xf64>, memref<?xf64>, memref<?xf64>
  %d = gpu.create_coo_aos %i, %i, %i, %m, %m : memref<?xf64>, memref<?xf64>
  %e = gpu.create_bsr %i, %i, %i, %i, %i, %m, %m, %m : memref<?xf64>, memref<?xf64>, memref<?xf64>
  %f = gpu.create_2to4_spmat {PRUNE_AND_CHECK} %i, %i, %m : memref<?xf64>
  %r, %cc, %n = gpu.spmat_get_size %spmat
  gpu.set_csr_pointers %spmat, %m, %m, %m : memref<?xf64>, memref<?xf64>, memref<?xf64>
  %desc = gpu.spgemm_create_descr
  %sz = gpu.spgemm_work_estimation_or_compute {WORK_ESTIMATION} %spmat, %spmat, %spmat, %desc, %i, %m : f32 into memref<?xf64>
  %sz2 = gpu.spgemm_work_estimation_or_compute {COMPUTE} %spmat{TRANSPOSE}, %spmat{TRANSPOSE}, %spmat, %desc, %i, %m : f32 into memref<?xf64>
  gpu.spgemm_copy %spmat, %spmat, %spmat, %desc : f32
  gpu.spgemm_copy %spmat {TRANSPOSE}, %spmat {TRANSPOSE}, %spmat, %desc : f32
  gpu.spgemm_destroy_descr %desc
  gpu.destroy_sp_mat %f
  gpu.destroy_dn_tensor %a
  return
}

func.func @sparse_more_async(%spmat: !gpu.sparse.spmat_handle, %m: memref<?xf32>, %i: index, %t: !gpu.async.token) {
  %f, %t1 = gpu.create_2to4_spmat async [%t] {PRUNE_ONLY} %i, %i, %m : memref<?xf32>
  %r, %c, %n, %t2 = gpu.spmat_get_size async [%t1] %f
  %t3 = gpu.set_csr_pointers async [%t2] %spmat, %m, %m, %m : memref<?xf32>, memref<?xf32>, memref<?xf32>
  %desc, %t4 = gpu.spgemm_create_descr async [%t3]
  %sz, %t5 = gpu.spgemm_work_estimation_or_compute async [%t4] {COMPUTE} %spmat, %spmat {CONJUGATE_TRANSPOSE}, %spmat, %desc, %i, %m : f32 into memref<?xf32>
  %t6 = gpu.spgemm_copy async [%t5] %spmat {TRANSPOSE}, %spmat, %spmat, %desc {note} : f32
  %t7 = gpu.spgemm_destroy_descr async [%t6] %desc
  %e, %t8 = gpu.create_bsr async [%t7] %i, %i, %i, %i, %i, %m, %m, %m : memref<?xf32>, memref<?xf32>, memref<?xf32>
  %t9 = gpu.destroy_sp_mat async [%t8] %e
  gpu.wait [%t9]
  return
}
