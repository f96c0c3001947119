// RUN: dhir-opt %s | filecheck %s
// RUN: dhir-opt %s | dhir-opt | filecheck %s
// RUN: dhir-opt %s --print-op-generic | dhir-opt | filecheck %s

// The gpu dialect in MLIR 22's custom syntax (xDSL 0.74 has only the generic
// form).

// CHECK:      builtin.module attributes {gpu.container_module} {
// CHECK-NEXT:   gpu.module @kernels {
module attributes {gpu.container_module} {
  gpu.module @kernels {
    // CHECK-NEXT: gpu.func @ids(%out: memref<?xindex>) kernel {
    gpu.func @ids(%out: memref<?xindex>) kernel {
      // CHECK-NEXT: %tx = gpu.thread_id x
      // CHECK-NEXT: %by = gpu.block_id y
      // CHECK-NEXT: %bdz = gpu.block_dim z
      // CHECK-NEXT: %gdx = gpu.grid_dim x
      // CHECK-NEXT: %gid = gpu.global_id x upper_bound 4096
      // CHECK-NEXT: %lane = gpu.lane_id
      // CHECK-NEXT: %lane2 = gpu.lane_id upper_bound 32
      // CHECK-NEXT: %nsg = gpu.num_subgroups : index
      // CHECK-NEXT: %sg = gpu.subgroup_id : index
      // CHECK-NEXT: %sgs = gpu.subgroup_size upper_bound 32 : index
      // CHECK-NEXT: gpu.barrier{{$}}
      // CHECK-NEXT: memref.store %tx, %out[%gid] : memref<?xindex>
      // CHECK-NEXT: gpu.return{{$}}
      %tx = gpu.thread_id x
      %by = gpu.block_id y
      %bdz = gpu.block_dim z
      %gdx = gpu.grid_dim x
      %gid = gpu.global_id x upper_bound 4096
      %lane = gpu.lane_id
      %lane2 = gpu.lane_id upper_bound 32
      %nsg = gpu.num_subgroups : index
      %sg = gpu.subgroup_id : index
      %sgs = gpu.subgroup_size upper_bound 32 : index
      gpu.barrier
      memref.store %tx, %out[%gid] : memref<?xindex>
      gpu.return
    }
    // CHECK:      gpu.func @attrs(%x: f32 {llvm.noalias}, %y: i32) kernel attributes {gpu.known_block_size = array<i32: 128, 1, 1>} {
    gpu.func @attrs(%x: f32 {llvm.noalias}, %y: i32) kernel attributes {gpu.known_block_size = array<i32: 128, 1, 1>} {
      gpu.return
    }
    // CHECK:      gpu.func @helper(%a: f32) -> f32 {
    // CHECK-NEXT:   gpu.return %a : f32
    gpu.func @helper(%a: f32) -> f32 {
      gpu.return %a : f32
    }
    // CHECK:      gpu.func @two(%a: f32) -> (f32 {llvm.x}, i32) {
    gpu.func @two(%a: f32) -> (f32 {llvm.x}, i32) {
      %c = arith.constant 0 : i32
      gpu.return %a, %c : f32, i32
    }
    // Attributions are entry block arguments after the function's own.
    // CHECK:      gpu.func @shared(%a: f32) workgroup(%w : memref<32xf32, #gpu.address_space<workgroup>>) private(%p : memref<1xf32, #gpu.address_space<private>>) kernel {
    // CHECK-NEXT:   %c0 = arith.constant 0 : index
    // CHECK-NEXT:   memref.store %a, %w[%c0] : memref<32xf32, #gpu.address_space<workgroup>>
    gpu.func @shared(%a: f32) workgroup(%w : memref<32xf32, #gpu.address_space<workgroup>>) private(%p : memref<1xf32, #gpu.address_space<private>>) kernel {
      %c0 = arith.constant 0 : index
      memref.store %a, %w[%c0] : memref<32xf32, #gpu.address_space<workgroup>>
      gpu.return
    }
  }
  // CHECK:      gpu.module @empty attributes {note} {
  // CHECK-NEXT: }
  gpu.module @empty attributes {note} {
  }

  // CHECK-LABEL: func.func @host
  func.func @host(%m: memref<?xf32>, %n: index, %f: f32, %h: memref<*xf32>, %i: i32) {
    %c1 = arith.constant 1 : index
    %c0i = arith.constant 0 : i32
    // CHECK:      gpu.launch_func @kernels::@ids blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) args(%m : memref<?xf32>){{$}}
    gpu.launch_func @kernels::@ids blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) args(%m : memref<?xf32>)
    // CHECK-NEXT: gpu.launch_func @kernels::@attrs blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) dynamic_shared_memory_size %c0i args(%f : f32, %i : i32)
    gpu.launch_func @kernels::@attrs blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) dynamic_shared_memory_size %c0i args(%f : f32, %i : i32)
    // CHECK-NEXT: gpu.launch_func @kernels::@attrs blocks in (%i, %i, %i) threads in (%i, %i, %i) : i32 args(%f : f32, %i : i32) {note}
    gpu.launch_func @kernels::@attrs blocks in (%i, %i, %i) threads in (%i, %i, %i) : i32 args(%f : f32, %i : i32) {note}
    // CHECK-NEXT: gpu.launch_func @kernels::@attrs clusters in (%c1, %c1, %c1) blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) args(%f : f32, %i : i32)
    gpu.launch_func @kernels::@attrs clusters in (%c1, %c1, %c1) blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) args(%f : f32, %i : i32)
    // CHECK-NEXT: %t0 = gpu.wait async{{$}}
    %t0 = gpu.wait async
    // CHECK-NEXT: %t1 = gpu.launch_func async [%t0] @kernels::@attrs blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) args(%f : f32, %i : i32)
    %t1 = gpu.launch_func async [%t0] @kernels::@attrs blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) args(%f : f32, %i : i32)
    // CHECK-NEXT: %d, %t2 = gpu.alloc async [%t1] (%n) : memref<?xf32>
    %d, %t2 = gpu.alloc async [%t1] (%n) : memref<?xf32>
    // CHECK-NEXT: %d2 = gpu.alloc (%n) : memref<?xf32>
    %d2 = gpu.alloc (%n) : memref<?xf32>
    // CHECK-NEXT: %d3 = gpu.alloc host_shared () : memref<4xf32>
    %d3 = gpu.alloc host_shared () : memref<4xf32>
    // CHECK-NEXT: %t3 = gpu.memcpy async [%t2] %d, %m : memref<?xf32>, memref<?xf32>
    %t3 = gpu.memcpy async [%t2] %d, %m : memref<?xf32>, memref<?xf32>
    // CHECK-NEXT: gpu.memcpy %d2, %m : memref<?xf32>, memref<?xf32>{{$}}
    gpu.memcpy %d2, %m : memref<?xf32>, memref<?xf32>
    // CHECK-NEXT: %t4 = gpu.dealloc async [%t3] %d : memref<?xf32>
    %t4 = gpu.dealloc async [%t3] %d : memref<?xf32>
    // CHECK-NEXT: gpu.dealloc %d2 : memref<?xf32>
    gpu.dealloc %d2 : memref<?xf32>
    // CHECK-NEXT: gpu.wait [%t4]{{$}}
    gpu.wait [%t4]
    // CHECK-NEXT: gpu.wait{{$}}
    gpu.wait
    // CHECK-NEXT: gpu.host_register %h : memref<*xf32>
    gpu.host_register %h : memref<*xf32>
    // CHECK-NEXT: gpu.host_unregister %h : memref<*xf32>
    gpu.host_unregister %h : memref<*xf32>
    // CHECK-NEXT: gpu.set_default_device %c0i{{$}}
    gpu.set_default_device %c0i
    func.return
  }

  // The body's 12 index arguments are named by the header.
  // CHECK-LABEL: func.func @launch
  func.func @launch(%m: memref<?xf32>, %n: index, %shm: i32) {
    %c1 = arith.constant 1 : index
    // CHECK:      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) {
    // CHECK-NEXT:   %v = memref.load %m[%tx] : memref<?xf32>
    // CHECK-NEXT:   %sum = gpu.all_reduce add %v uniform {
    // CHECK-NEXT:   } : (f32) -> f32
    // CHECK-NEXT:   %min = gpu.all_reduce minnumf %v {
    // CHECK-NEXT:   } : (f32) -> f32
    // CHECK-NEXT:   %r = gpu.all_reduce %v {
    // CHECK-NEXT:   ^bb0(%lhs: f32, %rhs: f32):
    // CHECK-NEXT:     %s = arith.addf %lhs, %rhs : f32
    // CHECK-NEXT:     gpu.yield %s : f32
    // CHECK-NEXT:   } : (f32) -> f32
    // CHECK-NEXT:   gpu.terminator{{$}}
    // CHECK-NEXT: }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) {
      %v = memref.load %m[%tx] : memref<?xf32>
      %sum = gpu.all_reduce add %v uniform {} : (f32) -> (f32)
      %min = gpu.all_reduce minnumf %v {} : (f32) -> f32
      %r = gpu.all_reduce %v {
      ^bb0(%lhs: f32, %rhs: f32):
        %s = arith.addf %lhs, %rhs : f32
        gpu.yield %s : f32
      } : (f32) -> (f32)
      gpu.terminator
    }
    // CHECK-NEXT: %t = gpu.wait async
    // CHECK-NEXT: %done = gpu.launch async [%t] blocks(%bx_1, %by_1, %bz_1) in (%gx_1 = %c1, %gy_1 = %c1, %gz_1 = %c1) threads(%tx_1, %ty_1, %tz_1) in (%sx_1 = %n, %sy_1 = %c1, %sz_1 = %c1) dynamic_shared_memory_size %shm module(@mod) function(@fn) {
    // CHECK-NEXT:   gpu.terminator
    // CHECK-NEXT: } {note = 1 : i32}
    %t = gpu.wait async
    %done = gpu.launch async [%t] blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) dynamic_shared_memory_size %shm module(@mod) function(@fn) {
      gpu.terminator
    } {note = 1 : i32}
    // CHECK-NEXT: gpu.launch clusters(%cx, %cy, %cz) in (%csx = %c1, %csy = %c1, %csz = %c1) blocks(%bx_2, %by_2, %bz_2) in (%gx_2 = %c1, %gy_2 = %c1, %gz_2 = %c1) threads(%tx_2, %ty_2, %tz_2) in (%sx_2 = %n, %sy_2 = %c1, %sz_2 = %c1) workgroup(%w : memref<32xf32, #gpu.address_space<workgroup>>) private(%p : memref<1xf32, #gpu.address_space<private>>) {
    // CHECK-NEXT:   %x = memref.load %w[%cx] : memref<32xf32, #gpu.address_space<workgroup>>
    // CHECK-NEXT:   memref.store %x, %p[%csz] : memref<1xf32, #gpu.address_space<private>>
    // CHECK-NEXT:   gpu.terminator
    // CHECK-NEXT: }
    gpu.launch clusters(%cx, %cy, %cz) in (%csx = %c1, %csy = %c1, %csz = %c1) blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) workgroup(%w : memref<32xf32, #gpu.address_space<workgroup>>) private(%p : memref<1xf32, #gpu.address_space<private>>) {
      %x = memref.load %w[%cx] : memref<32xf32, #gpu.address_space<workgroup>>
      memref.store %x, %p[%csz] : memref<1xf32, #gpu.address_space<private>>
      gpu.terminator
    }
    func.return
  }
}
