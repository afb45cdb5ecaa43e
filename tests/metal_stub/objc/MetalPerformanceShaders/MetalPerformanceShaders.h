// TEST-ONLY stand-in for Apple's <MetalPerformanceShaders/MetalPerformanceShaders.h>:
// NOT Apple's header. Declares only the MPS names csrc/metal_shim.m uses (the gemm:
// MPSMatrix, MPSMatrixDescriptor, MPSMatrixMultiplication; csrc/METAL_API.md), with the
// argument and return types of Apple's documented API, for tests/runtime/test_metal_shim.py's
// clang type check. Nothing here is an implementation.
#ifndef RLX_STUB_MPS_H
#define RLX_STUB_MPS_H

#import <Metal/Metal.h>

// ---- MPSCore/MPSKernel.h, MPSCoreTypes.h
BOOL MPSSupportsMTLDevice(id<MTLDevice> device) RLX_STUB_MACOS(10.13);

typedef NS_OPTIONS(uint32_t, MPSDataType) {
    MPSDataTypeFloatBit = 0x10000000,
    MPSDataTypeFloat32 = MPSDataTypeFloatBit | 32,
    MPSDataTypeFloat16 = MPSDataTypeFloatBit | 16,
};

@interface MPSKernel : NSObject <NSCopying>
@end

// ---- MPSMatrix/MPSMatrixTypes.h
RLX_STUB_MACOS(10.13)
@interface MPSMatrixDescriptor : NSObject
+ (MPSMatrixDescriptor *)matrixDescriptorWithRows:(NSUInteger)rows
                                          columns:(NSUInteger)columns
                                         rowBytes:(NSUInteger)rowBytes
                                         dataType:(MPSDataType)dataType;
@end

RLX_STUB_MACOS(10.13)
@interface MPSMatrix : NSObject
- (instancetype)initWithBuffer:(id<MTLBuffer>)buffer
                        offset:(NSUInteger)offset
                    descriptor:(MPSMatrixDescriptor *)descriptor RLX_STUB_MACOS(10.15);
@end

// ---- MPSMatrix/MPSMatrixMultiplication.h
RLX_STUB_MACOS(10.13)
@interface MPSMatrixBinaryKernel : MPSKernel
@end

RLX_STUB_MACOS(10.13)
@interface MPSMatrixMultiplication : MPSMatrixBinaryKernel
- (instancetype)initWithDevice:(id<MTLDevice>)device
                 transposeLeft:(BOOL)transposeLeft
                transposeRight:(BOOL)transposeRight
                    resultRows:(NSUInteger)resultRows
                 resultColumns:(NSUInteger)resultColumns
               interiorColumns:(NSUInteger)interiorColumns
                         alpha:(double)alpha
                          beta:(double)beta;
- (void)encodeToCommandBuffer:(id<MTLCommandBuffer>)commandBuffer
                   leftMatrix:(MPSMatrix *)leftMatrix
                  rightMatrix:(MPSMatrix *)rightMatrix
                 resultMatrix:(MPSMatrix *)resultMatrix;
@end

#endif
