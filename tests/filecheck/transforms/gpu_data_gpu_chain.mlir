// GPU task -> GPU task on one rank: the buffer stays on the device between them.
// The first task copies in what it touches and copies nothing back (the next user of
// %b is the next GPU task on the same rank); the second finds %b valid on the device,
// copies nothing in, and copies %b back once at the end (code after the schedule, here
// the caller, may read it). %a is only read, so it never goes back.
// RUN: dhir-opt %s -p 'dhir-gpu-data{ranks=2}' | filecheck %s

// CHECK-LABEL: func.func @main
// CHECK:         %a_dev1, %b_dev1 = scf.if %gpu_on1 -> (memref<64xi32>, memref<64xi32>) {
// CHECK:           %[[A:.*]] = gpu.alloc () : memref<64xi32>
// CHECK-NEXT:      %[[B:.*]] = gpu.alloc () : memref<64xi32>
// CHECK-COUNT-2:   func.call @dhir_rt_gpu_pair
// CHECK-NEXT:      scf.yield %[[A]], %[[B]] : memref<64xi32>, memref<64xi32>
// CHECK-NEXT:    } else {
// CHECK-NEXT:      scf.yield %a, %b : memref<64xi32>, memref<64xi32>
// CHECK-NEXT:    }{dhir.device_buffer}
// CHECK:         %first = dhir.task %gpu, %a, %b
// CHECK:           gpu.memcpy %a_dev1, %a
// CHECK-NEXT:      gpu.memcpy %b_dev1, %b
// CHECK-NOT:       gpu.memcpy
// CHECK:         %second = dhir.task %gpu, %b
// CHECK-NOT:       gpu.memcpy %b_dev1, %b
// CHECK:           gpu.launch
// CHECK:           gpu.memcpy %b, %b_dev1 : memref<64xi32>, memref<64xi32>
// CHECK-NEXT:    }
// CHECK:         scf.if %gpu_on1 {
// CHECK-NEXT:      gpu.dealloc %a_dev1 : memref<64xi32>
// CHECK-NEXT:      gpu.dealloc %b_dev1 : memref<64xi32>
// CHECK-NEXT:    }{dhir.device_buffer}

func.func @main(%a: memref<64xi32>, %b: memref<64xi32>) {
  dhir.schedule %a, %b {
    %gpu = dhir.target {arch = "sm_80"}
    %first = dhir.task %gpu, %a, %b attributes {dhir.rank = 1 : i64} {
      %c0 = arith.constant 0 : index
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      scf.parallel (%i) = (%c0) to (%c64) step (%c1) {
        %x = memref.load %a[%i] : memref<64xi32>
        memref.store %x, %b[%i] : memref<64xi32>
      }
    }
    %second = dhir.task %gpu, %b attributes {dhir.rank = 1 : i64} {
      %c1 = arith.constant 1 : index
      %c64 = arith.constant 64 : index
      gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
                 threads(%tx, %ty, %tz) in (%sx = %c64, %sy = %c1, %sz = %c1) {
        %v = memref.load %b[%tx] : memref<64xi32>
        %w = arith.addi %v, %v : i32
        memref.store %w, %b[%tx] : memref<64xi32>
        gpu.terminator
      }
    }
  }
  return
}
