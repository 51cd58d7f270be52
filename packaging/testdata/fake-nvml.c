/*
 * A libnvidia-ml.so.1 with the few functions topogen collect calls on a node
 * without GPUs (TestNVMLBindsLazily): the packaged topogen must find them
 * where go-nvml dlopens the library, at their first call. The driver
 * version is one no real driver has, so the answer is this library's.
 */
#include <string.h>

int nvmlInit_v2(void) { return 0; }
int nvmlInitWithFlags(unsigned int flags) { (void)flags; return 0; }
int nvmlShutdown(void) { return 0; }
int nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
	strncpy(version, "999.42.1", length);
	return 0;
}
int nvmlSystemGetCudaDriverVersion(int *version) { *version = 12080; return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *version) { *version = 12080; return 0; }
int nvmlDeviceGetCount_v2(unsigned int *count) { *count = 0; return 0; }
