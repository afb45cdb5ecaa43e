// TEST-ONLY stand-in for Apple's <Metal/Metal.h>: NOT Apple's header.
// Declares only the Metal protocols, classes, selectors, properties, enums and functions
// that csrc/metal_shim.m uses (csrc/METAL_API.md lists each with a reference project),
// with the argument and return types of Apple's documented API and the macOS version
// each was introduced in, so that tests/runtime/test_metal_shim.py can type-check the shim with
// clang. Enums list only the values the shim uses (with Apple's numbers); nothing here
// is an implementation.
#ifndef RLX_STUB_METAL_H
#define RLX_STUB_METAL_H

#import <Foundation/Foundation.h>

@protocol MTLDevice, MTLCommandQueue, MTLCommandBuffer, MTLBuffer, MTLLibrary, MTLFunction,
    MTLComputePipelineState, MTLIndirectCommandBuffer, MTLIndirectComputeCommand;
@class MTLCompileOptions, MTLComputePipelineDescriptor, MTLComputePipelineReflection,
    MTLIndirectCommandBufferDescriptor;

// ---- MTLTypes.h
typedef struct {
    NSUInteger width, height, depth;
} MTLSize;

static inline MTLSize MTLSizeMake(NSUInteger width, NSUInteger height, NSUInteger depth) {
    MTLSize size = {width, height, depth};
    return size;
}

// ---- MTLResource.h (Apple derives these from MTLCPUCacheMode / MTLStorageMode shifted into
// place; both used values are 0)
typedef NS_OPTIONS(NSUInteger, MTLResourceOptions) {
    MTLResourceCPUCacheModeDefaultCache = 0,
    MTLResourceStorageModeShared = 0,
};

@protocol MTLResource <NSObject>
@end

// ---- MTLBuffer.h
@protocol MTLBuffer <MTLResource>
- (void *)contents;
@end

// ---- MTLDevice.h
typedef NS_ENUM(NSInteger, MTLGPUFamily) {
    MTLGPUFamilyApple9 RLX_STUB_MACOS(14.0) = 1009,
} RLX_STUB_MACOS(10.15);

typedef NS_OPTIONS(NSUInteger, MTLPipelineOption) {
    MTLPipelineOptionNone = 0,
};

typedef MTLComputePipelineReflection *__autoreleasing MTLAutoreleasedComputePipelineReflection;

id<MTLDevice> MTLCreateSystemDefaultDevice(void) RLX_STUB_MACOS(10.11) NS_RETURNS_RETAINED;

@protocol MTLDevice <NSObject>
@property(readonly) NSString *name;
@property(readonly) uint64_t registryID RLX_STUB_MACOS(10.13);
@property(readonly) MTLSize maxThreadsPerThreadgroup;
@property(readonly) NSUInteger maxBufferLength RLX_STUB_MACOS(10.14);
@property(readonly) BOOL hasUnifiedMemory RLX_STUB_MACOS(10.15);
- (BOOL)supportsFamily:(MTLGPUFamily)gpuFamily RLX_STUB_MACOS(10.15);
- (id<MTLCommandQueue>)newCommandQueueWithMaxCommandBufferCount:(NSUInteger)maxCommandBufferCount;
- (id<MTLBuffer>)newBufferWithLength:(NSUInteger)length options:(MTLResourceOptions)options;
- (id<MTLLibrary>)newLibraryWithSource:(NSString *)source
                               options:(MTLCompileOptions *)options
                                 error:(NSError **)error;
- (id<MTLComputePipelineState>)newComputePipelineStateWithDescriptor:(MTLComputePipelineDescriptor *)descriptor
                                                             options:(MTLPipelineOption)options
                                                          reflection:(MTLAutoreleasedComputePipelineReflection *)reflection
                                                               error:(NSError **)error;
- (id<MTLIndirectCommandBuffer>)newIndirectCommandBufferWithDescriptor:(MTLIndirectCommandBufferDescriptor *)descriptor
                                                       maxCommandCount:(NSUInteger)maxCount
                                                               options:(MTLResourceOptions)options
    RLX_STUB_MACOS(10.14);
@end

// ---- MTLLibrary.h
typedef NS_ENUM(NSInteger, MTLMathMode) {
    MTLMathModeSafe = 0,
} RLX_STUB_MACOS(15.0);

@interface MTLCompileOptions : NSObject <NSCopying>
@property(copy) NSDictionary<NSString *, NSObject *> *preprocessorMacros;
@property BOOL fastMathEnabled RLX_STUB_MACOS_DEPRECATED(10.11, 15.0);
@property MTLMathMode mathMode RLX_STUB_MACOS(15.0);
@end

@protocol MTLFunction <NSObject>
@end

@protocol MTLLibrary <NSObject>
- (id<MTLFunction>)newFunctionWithName:(NSString *)functionName;
@end

// ---- MTLComputePipeline.h
@interface MTLComputePipelineReflection : NSObject
@end

@interface MTLComputePipelineDescriptor : NSObject <NSCopying>
@property(strong) id<MTLFunction> computeFunction;
@property BOOL supportIndirectCommandBuffers RLX_STUB_MACOS(10.14);
@end

@protocol MTLComputePipelineState <NSObject>
@property(readonly) NSUInteger maxTotalThreadsPerThreadgroup;
@property(readonly) NSUInteger threadExecutionWidth;
@end

// ---- MTLCommandQueue.h, MTLCommandBuffer.h
@protocol MTLCommandQueue <NSObject>
- (id<MTLCommandBuffer>)commandBuffer;
@end

typedef NS_ENUM(NSUInteger, MTLCommandBufferStatus) {
    MTLCommandBufferStatusError = 5,
};

typedef NS_ENUM(NSUInteger, MTLDispatchType) {
    MTLDispatchTypeConcurrent = 1,
} RLX_STUB_MACOS(10.14);

@protocol MTLComputeCommandEncoder;

@protocol MTLCommandBuffer <NSObject>
@property(readonly) MTLCommandBufferStatus status;
@property(readonly) NSError *error;
@property(readonly) CFTimeInterval GPUStartTime RLX_STUB_MACOS(10.15);
@property(readonly) CFTimeInterval GPUEndTime RLX_STUB_MACOS(10.15);
- (id<MTLComputeCommandEncoder>)computeCommandEncoderWithDispatchType:(MTLDispatchType)dispatchType
    RLX_STUB_MACOS(10.14);
- (void)commit;
- (void)waitUntilCompleted;
@end

// ---- MTLCommandEncoder.h, MTLComputeCommandEncoder.h
typedef NS_OPTIONS(NSUInteger, MTLResourceUsage) {
    MTLResourceUsageRead = 1 << 0,
    MTLResourceUsageWrite = 1 << 1,
} RLX_STUB_MACOS(10.13);

typedef NS_OPTIONS(NSUInteger, MTLBarrierScope) {
    MTLBarrierScopeBuffers = 1 << 0,
} RLX_STUB_MACOS(10.14);

@protocol MTLCommandEncoder <NSObject>
- (void)endEncoding;
@end

@protocol MTLComputeCommandEncoder <MTLCommandEncoder>
- (void)setComputePipelineState:(id<MTLComputePipelineState>)state;
- (void)setBytes:(const void *)bytes length:(NSUInteger)length atIndex:(NSUInteger)index;
- (void)setBuffer:(id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)dispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
- (void)useResource:(id<MTLResource>)resource usage:(MTLResourceUsage)usage RLX_STUB_MACOS(10.13);
- (void)memoryBarrierWithScope:(MTLBarrierScope)scope RLX_STUB_MACOS(10.14);
- (void)executeCommandsInBuffer:(id<MTLIndirectCommandBuffer>)indirectCommandbuffer
                      withRange:(NSRange)executionRange RLX_STUB_MACOS(11.0);
@end

// ---- MTLIndirectCommandBuffer.h, MTLIndirectCommandEncoder.h
typedef NS_OPTIONS(NSUInteger, MTLIndirectCommandType) {
    MTLIndirectCommandTypeConcurrentDispatch RLX_STUB_MACOS(11.0) = 1 << 5,
} RLX_STUB_MACOS(10.14);

RLX_STUB_MACOS(10.14)
@interface MTLIndirectCommandBufferDescriptor : NSObject
@property MTLIndirectCommandType commandTypes;
@property BOOL inheritPipelineState RLX_STUB_MACOS(10.14);
@property BOOL inheritBuffers;
@property NSUInteger maxKernelBufferBindCount;
@end

RLX_STUB_MACOS(10.14)
@protocol MTLIndirectCommandBuffer <MTLResource>
- (void)resetWithRange:(NSRange)range;
- (id<MTLIndirectComputeCommand>)indirectComputeCommandAtIndex:(NSUInteger)commandIndex RLX_STUB_MACOS(11.0);
@end

RLX_STUB_MACOS(11.0)
@protocol MTLIndirectComputeCommand <NSObject>
- (void)setComputePipelineState:(id<MTLComputePipelineState>)pipelineState;
- (void)setKernelBuffer:(id<MTLBuffer>)buffer offset:(NSUInteger)offset atIndex:(NSUInteger)index;
- (void)concurrentDispatchThreadgroups:(MTLSize)threadgroupsPerGrid threadsPerThreadgroup:(MTLSize)threadsPerThreadgroup;
- (void)setBarrier;
- (void)reset;
@end

#endif
