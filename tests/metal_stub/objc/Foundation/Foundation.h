// TEST-ONLY stand-in for Apple's <Foundation/Foundation.h>: NOT Apple's header.
// Written for tests/runtime/test_metal_shim.py, which runs `clang -fsyntax-only -fobjc-arc`
// on csrc/metal_shim.m against tests/metal_stub/objc/ (no Mac, no SDK here), so a
// misspelled selector, a wrong argument count or a type mismatch fails CI.
// It declares only the Foundation / CoreFoundation names the shim uses (csrc/METAL_API.md),
// plus the base classes needed to type-check them, with the argument and return
// types of Apple's documented API. Nullability and most attributes are left out.
// Nothing here is an implementation: it is never linked or run.
#ifndef RLX_STUB_FOUNDATION_H
#define RLX_STUB_FOUNDATION_H

#include <stdint.h>

// ---- Availability: the SDK this stub stands for is macOS 15 (so both arms of the
// shim's `#ifdef __MAC_15_0` / `__MAC_14_0` are parsed; Apple's <AvailabilityVersions.h>
// defines them, and one per older release, as the version number). Clang's own availability attribute checks the
// shim's @available guards against the deployment target (-mmacosx-version-min).
#define __MAC_14_0 140000
#define __MAC_15_0 150000
#define RLX_STUB_MACOS(v) __attribute__((availability(macos, introduced = v)))
#define RLX_STUB_MACOS_DEPRECATED(v, d) __attribute__((availability(macos, introduced = v, deprecated = d)))

// ---- Objective-C basics (objc/objc.h, NSObjCRuntime.h)
#if __OBJC_BOOL_IS_BOOL
typedef bool BOOL;
#else
typedef signed char BOOL;
#endif
#define YES ((BOOL)1)
#define NO ((BOOL)0)
#ifndef nil
#define nil ((id)0)
#endif
typedef long NSInteger;
typedef unsigned long NSUInteger;
#define NS_ENUM(_type, _name) enum __attribute__((enum_extensibility(open))) _name : _type _name; \
    enum __attribute__((enum_extensibility(open))) _name : _type
#define NS_OPTIONS(_type, _name) enum __attribute__((flag_enum, enum_extensibility(open))) _name : _type _name; \
    enum __attribute__((flag_enum, enum_extensibility(open))) _name : _type
#define NS_FORMAT_FUNCTION(F, A) __attribute__((format(__NSString__, F, A)))
#define NS_RETURNS_RETAINED __attribute__((ns_returns_retained))

// ---- CoreFoundation (CFBase.h, CFDate.h)
typedef const void *CFTypeRef;
typedef double CFTimeInterval;

// ---- NSObject
@protocol NSObject
@end

@protocol NSCopying
@end

__attribute__((objc_root_class))
@interface NSObject <NSObject>
+ (instancetype)alloc;
+ (instancetype)new;
@end

// ---- NSRange (NSRange.h)
typedef struct _NSRange {
    NSUInteger location;
    NSUInteger length;
} NSRange;

static inline NSRange NSMakeRange(NSUInteger loc, NSUInteger len) {
    NSRange r = {loc, len};
    return r;
}

// ---- NSString, NSNumber (NSString.h, NSValue.h)
@interface NSString : NSObject <NSCopying>
+ (instancetype)stringWithUTF8String:(const char *)nullTerminatedCString;
+ (instancetype)stringWithFormat:(NSString *)format, ... NS_FORMAT_FUNCTION(1, 2);
@property(readonly) const char *UTF8String;
@end

// A boxed expression @(x) calls the NSNumber factory for x's type: the shim boxes only
// uintptr_t (unsigned long on LP64 macOS).
@interface NSNumber : NSObject <NSCopying>
+ (NSNumber *)numberWithUnsignedLong:(unsigned long)value;
@end

// ---- NSError, NSException (NSError.h, NSException.h)
@interface NSError : NSObject
@property(readonly, copy) NSString *localizedDescription;
@end

@interface NSException : NSObject
@property(readonly, copy) NSString *reason;
@end

// ---- NSDictionary (NSDictionary.h)
@interface NSDictionary<__covariant KeyType, __covariant ObjectType> : NSObject
@property(readonly) NSUInteger count;
- (ObjectType)objectForKey:(KeyType)aKey;
@end

@interface NSMutableDictionary<KeyType, ObjectType> : NSDictionary<KeyType, ObjectType>
- (void)setObject:(ObjectType)anObject forKey:(KeyType<NSCopying>)aKey;
- (void)removeObjectForKey:(KeyType)aKey;
- (void)removeAllObjects;
@end

// ---- ARC bridging (NSObject.h): +1 into CoreFoundation, and back
static inline CFTypeRef CFBridgingRetain(id X) { return (__bridge_retained CFTypeRef)X; }
static inline id CFBridgingRelease(CFTypeRef X) { return (__bridge_transfer id)X; }

#endif
