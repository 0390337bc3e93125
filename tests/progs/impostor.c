// A program posing as another: it takes argv[1] as its process name (comm) and sleeps until
// killed, whatever else its command line says. Run by an unprivileged user as
// `impostor dockerd --data-root DIR` or `impostor conmon -c ID -n NAME`, it is what any user of a
// host can start to pose as a container runtime.
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char** argv)
{
  if (argc < 2)
    return 2;
  prctl(PR_SET_NAME, argv[1], 0, 0, 0);
  for (;;)
    pause();
}
