// REQUIRES: mlir
// RUN: dhir-opt %s | mlir-opt-22 | dhir-opt | filecheck %s
// RUN: dhir-opt %s | mlir-opt-22 --mlir-print-op-generic | dhir-opt | filecheck %s
// RUN: dhir-opt %s --print-op-generic | mlir-opt-22 | dhir-opt | filecheck %s

// What dhir prints, mlir-opt-22 accepts; what mlir-opt-22 prints back, in
// either form, dhir parses to the same IR. In particular the kernel marker
// survives (xDSL's own gpu.func stores it where mlir-opt drops it).

// CHECK:      builtin.module attributes {gpu.container_module} {
// CHECK-NEXT:   gpu.module @kernels {
module attributes {gpu.container_module} {
  gpu.module @kernels {
    // CHECK-NEXT: gpu.func @ids(%[[OUT:.*]]: memref<?xindex> {llvm.noalias}) kernel {
    // CHECK-NEXT:   %[[TX:.*]] = gpu.thread_id x
    // CHECK-NEXT:   %{{.*}} = gpu.block_id y
    // CHECK-NEXT:   %{{.*}} = gpu.block_dim z
    // CHECK-NEXT:   %{{.*}} = gpu.grid_dim x
    // CHECK-NEXT:   %[[GID:.*]] = gpu.global_id x upper_bound 4096
    // CHECK-NEXT:   %{{.*}} = gpu.lane_id upper_bound 32
    // CHECK-NEXT:   %{{.*}} = gpu.num_subgroups : index
    // CHECK-NEXT:   %{{.*}} = gpu.subgroup_id : index
    // CHECK-NEXT:   %{{.*}} = gpu.subgroup_size : index
    // CHECK-NEXT:   gpu.barrier{{$}}
    // CHECK-NEXT:   memref.store %[[TX]], %[[OUT]][%[[GID]]] : memref<?xindex>
    // CHECK-NEXT:   gpu.return{{$}}
    // CHECK-NEXT: }
    gpu.func @ids(%out: memref<?xindex> {llvm.noalias}) kernel {
      %tx = gpu.thread_id x
      %by = gpu.block_id y
      %bdz = gpu.block_dim z
      %gdx = gpu.grid_dim x
      %gid = gpu.global_id x upper_bound 4096
      %lane = gpu.lane_id upper_bound 32
      %nsg = gpu.num_subgroups : index
      %sg = gpu.subgroup_id : index
      %sgs = gpu.subgroup_size : index
      gpu.barrier
      memref.store %tx, %out[%gid] : memref<?xindex>
      gpu.return
    }
    // CHECK-NEXT: gpu.func @shared(%{{.*}}: f32) workgroup(%{{.*}} : memref<32xf32, #gpu.address_space<workgroup>>) kernel attributes {gpu.known_block_size = array<i32: 32, 1, 1>} {
    gpu.func @shared(%a: f32) workgroup(%w : memref<32xf32, #gpu.address_space<workgroup>>) kernel attributes {gpu.known_block_size = array<i32: 32, 1, 1>} {
      gpu.return
    }
    // CHECK:      gpu.func @helper(%[[A:.*]]: f32) -> f32 {
    // CHECK-NEXT:   gpu.return %[[A]] : f32
    gpu.func @helper(%a: f32) -> f32 {
      gpu.return %a : f32
    }
  }

  // CHECK-LABEL: func.func @host
  func.func @host(%m: memref<?xindex>, %n: index, %f: f32, %i: i32) {
    %c1 = arith.constant 1 : index
    // CHECK:      gpu.launch_func @kernels::@ids blocks in (%[[C1:.*]], %[[C1]], %[[C1]]) threads in (%[[N:[^,]*]], %[[C1]], %[[C1]]) args(%{{.*}} : memref<?xindex>){{$}}
    gpu.launch_func @kernels::@ids blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) args(%m : memref<?xindex>)
    // CHECK-NEXT: gpu.launch_func @kernels::@shared blocks in (%[[I:[^,]*]], %[[I]], %[[I]]) threads in (%[[I]], %[[I]], %[[I]]) : i32 dynamic_shared_memory_size %[[I]] args(%{{.*}} : f32)
    gpu.launch_func @kernels::@shared blocks in (%i, %i, %i) threads in (%i, %i, %i) : i32 dynamic_shared_memory_size %i args(%f : f32)
    // CHECK-NEXT: %[[T0:.*]] = gpu.wait async{{$}}
    %t0 = gpu.wait async
    // CHECK-NEXT: %[[T1:.*]] = gpu.launch_func async [%[[T0]]] @kernels::@shared clusters in (%[[C1]], %[[C1]], %[[C1]]) blocks in (%[[C1]], %[[C1]], %[[C1]]) threads in (%[[N]], %[[C1]], %[[C1]]) args(%{{.*}} : f32)
    %t1 = gpu.launch_func async [%t0] @kernels::@shared clusters in (%c1, %c1, %c1) blocks in (%c1, %c1, %c1) threads in (%n, %c1, %c1) args(%f : f32)
    // CHECK-NEXT: %[[D:.*]], %[[T2:.*]] = gpu.alloc async [%[[T1]]] (%[[N]]) : memref<?xindex>
    %d, %t2 = gpu.alloc async [%t1] (%n) : memref<?xindex>
    // CHECK-NEXT: %[[H:.*]] = gpu.alloc host_shared () : memref<4xindex>
    %h = gpu.alloc host_shared () : memref<4xindex>
    // CHECK-NEXT: %[[T3:.*]] = gpu.memcpy async [%[[T2]]] %[[D]], %{{.*}} : memref<?xindex>, memref<?xindex>
    %t3 = gpu.memcpy async [%t2] %d, %m : memref<?xindex>, memref<?xindex>
    // CHECK-NEXT: %[[T4:.*]] = gpu.dealloc async [%[[T3]]] %[[D]] : memref<?xindex>
    %t4 = gpu.dealloc async [%t3] %d : memref<?xindex>
    // CHECK-NEXT: gpu.dealloc %[[H]] : memref<4xindex>
    gpu.dealloc %h : memref<4xindex>
    // CHECK-NEXT: gpu.wait [%[[T4]]]{{$}}
    gpu.wait [%t4]
    // CHECK-NEXT: gpu.set_default_device %{{.*}}{{$}}
    gpu.set_default_device %i
    func.return
  }

  // CHECK-LABEL: func.func @launch
  func.func @launch(%m: memref<?xf32>, %n: index, %shm: i32) {
    %c1 = arith.constant 1 : index
    // CHECK:      gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C1:[^,]*]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[N:[^,]*]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) {
    // CHECK-NEXT:   %[[V:.*]] = memref.load %{{.*}}[%[[TX]]] : memref<?xf32>
    // CHECK-NEXT:   %{{.*}} = gpu.all_reduce add %[[V]] uniform {
    // CHECK-NEXT:   } : (f32) -> f32
    // CHECK-NEXT:   %{{.*}} = gpu.all_reduce maxnumf %[[V]] {
    // CHECK-NEXT:   } : (f32) -> f32
    // CHECK-NEXT:   %{{.*}} = gpu.all_reduce %[[V]] {
    // CHECK-NEXT:   ^bb0(%[[L:.*]]: f32, %[[R:.*]]: f32):
    // CHECK-NEXT:     %[[S:.*]] = arith.addf %[[L]], %[[R]] : f32
    // CHECK-NEXT:     gpu.yield %[[S]] : f32
    // CHECK-NEXT:   } : (f32) -> f32
    // CHECK-NEXT:   gpu.terminator{{$}}
    // CHECK-NEXT: }
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) {
      %v = memref.load %m[%tx] : memref<?xf32>
      %sum = gpu.all_reduce add %v uniform {} : (f32) -> (f32)
      %max = gpu.all_reduce maxnumf %v {} : (f32) -> f32
      %r = gpu.all_reduce %v {
      ^bb0(%lhs: f32, %rhs: f32):
        %s = arith.addf %lhs, %rhs : f32
        gpu.yield %s : f32
      } : (f32) -> (f32)
      gpu.terminator
    }
    // CHECK-NEXT: %[[T:.*]] = gpu.wait async
    // CHECK-NEXT: %{{.*}} = gpu.launch async [%[[T]]] blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C1]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %[[N]], %{{.*}} = %[[C1]], %{{.*}} = %[[C1]]) dynamic_shared_memory_size %{{.*}} module(@mod) function(@fn) {
    // CHECK-NEXT:   gpu.terminator
    // CHECK-NEXT: } {note = 1 : i32}
    %t = gpu.wait async
    %done = gpu.launch async [%t] blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1) threads(%tx, %ty, %tz) in (%sx = %n, %sy = %c1, %sz = %c1) dynamic_shared_memory_size %shm module(@mod) function(@fn) {
      gpu.terminator
    } {note = 1 : i32}
    // CHECK-NEXT: gpu.launch clusters(%[[CX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %[[C1]], %{{.*}} = %[[C1]], %[[CSZ:.*]] = %[[C1]]) blocks(%{{.*}}) in (%{{.*}}) threads(%{{.*}}) in (%{{.*}}) workgroup(%[[W:.*]] : memref<32xf32, #gpu.address_space<workgroup>>) private(%[[P:.*]] : memref<1xf32, #gpu.address_space<private>>) {
    // CHECK-NEXT:   %[[X:.*]] = memref.load %[[W]][%[[CX]]] : memref<32xf32, #gpu.address_space<workgroup>>
    // CHECK-NEXT:   memref.store %[[X]], %[[P]][%[[CSZ]]] : memref<1xf32, #gpu.address_space<private>>
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
